"""Jaguar: homomorphic linear layers on a power-of-two ring (part 1 of the method).

RLWE over ``Z_{2^K}[X]/(X^N+1)``, SPA-Conv (scalar–polynomial accumulation in the coefficient
domain), truncation by local right shifts, client decryption through an auxiliary NTT prime,
and a Cheetah-style prime-modulus baseline in the same code.
"""

from trustlab.methods.jaguar.cheetah import (
    CheetahClient,
    CheetahServer,
    RNSCiphertext,
    cheetah_params,
)
from trustlab.methods.jaguar.layout import ConvLayout, FCLayout, conv2d_int, plan_conv, plan_fc
from trustlab.methods.jaguar.linear import (
    JaguarClient,
    JaguarServer,
    LinearResponse,
    NoiseBudget,
    linear_noise_budget,
    query_nbytes,
    round_shift,
)
from trustlab.methods.jaguar.ntt import NTTContext, aux_negacyclic_mul, find_ntt_primes
from trustlab.methods.jaguar.params import (
    HE_STANDARD_128,
    JaguarParams,
    PrimeParams,
    jaguar_params,
    security_bits,
)
from trustlab.methods.jaguar.ring import centered, monomial_mul, negacyclic_mul_exact, to_ring
from trustlab.methods.jaguar.rlwe import (
    Ciphertext,
    SecretKey,
    decrypt,
    encrypt,
    keygen,
    mod_switch,
    phase,
)
from trustlab.methods.jaguar.sampling import Sampler
from trustlab.methods.jaguar.spa import spa_accumulate, spa_accumulate_reference

__all__ = [
    "HE_STANDARD_128",
    "CheetahClient",
    "CheetahServer",
    "Ciphertext",
    "ConvLayout",
    "FCLayout",
    "JaguarClient",
    "JaguarParams",
    "JaguarServer",
    "LinearResponse",
    "NTTContext",
    "NoiseBudget",
    "PrimeParams",
    "RNSCiphertext",
    "Sampler",
    "SecretKey",
    "aux_negacyclic_mul",
    "centered",
    "cheetah_params",
    "conv2d_int",
    "decrypt",
    "encrypt",
    "find_ntt_primes",
    "jaguar_params",
    "keygen",
    "linear_noise_budget",
    "mod_switch",
    "monomial_mul",
    "negacyclic_mul_exact",
    "phase",
    "plan_conv",
    "plan_fc",
    "query_nbytes",
    "round_shift",
    "security_bits",
    "spa_accumulate",
    "spa_accumulate_reference",
    "to_ring",
]
