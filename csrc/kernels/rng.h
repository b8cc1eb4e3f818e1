/* kernels/rng.h -- the random number generators of one core (docs/spec/machine-model.md §3.1, §6.6;
** docs/spec/nki-isa-semantics.md §3.28-3.29).
**
**   host   MT19937-64 (the standard 64-bit Mersenne Twister), seeded with 42 + the
**          Simulator's `seed` (42 by default, as the compiler's simulator seeds it).
**          Memset(Random) draws from it; it also fills the device states below.
**   gen-1  per partition 6 x uint32 (Rand; GetRandState/SetRandState). The words mean,
**          by `random_algorithm`: LFSR word 0 is a 32-bit Galois LFSR (taps 0x80200003);
**          PCG32 words 0-1 the 64-bit state (lo, hi), words 2-3 the increment (forced
**          odd); PHILOX_1 words 0-3 the 128-bit counter, words 4-5 the key of
**          Philox-4x32-10.
**   gen-2  per partition 4 lanes x 6 uint32 Xorwow states [x, y, z, w, v, d] (Rand2,
**          Dropout; RandGetState/RandSetState). Element j of a partition uses lane j % 4.
**
** At every run start each core's host generator is reseeded and the device states are
** filled from it: for each partition p, gen-1 p (3 draws, low word first), then gen-2 p
** (12 draws). Every core starts from the same state (each core seeds its own generator
** with the same seed, as the compiler's simulator does per InstVisitor). */
#ifndef BS_KERNELS_RNG_H
#define BS_KERNELS_RNG_H

#include "../core/common.h"

#define BS_MT64_N 312
#define BS_RNG_WORDS 6           /* one generator state, uint32 words */
#define BS_RNG_LANES 4           /* gen-2 lanes per partition */

typedef struct bs_mt64 {
    uint64_t mt[BS_MT64_N];
    int32_t  mti;
} bs_mt64;

typedef struct bs_rng {
    uint64_t seed;               /* 42 + Simulator seed */
    int32_t  ready;              /* 0: reseed before the next use */
    bs_mt64  host;
    uint32_t gen1[BS_NUM_PARTITIONS][BS_RNG_WORDS];
    uint32_t gen2[BS_NUM_PARTITIONS][BS_RNG_LANES][BS_RNG_WORDS];
} bs_rng;

void     bs_mt64_seed(bs_mt64 *m, uint64_t seed);
uint64_t bs_mt64_next(bs_mt64 *m);
/* Reseed the host generator with `seed` and refill every device state from it. */
void     bs_rng_reset(bs_rng *r, uint64_t seed);
/* The generators, reseeded first if this run has not used them yet. */
bs_rng  *bs_rng_use(bs_rng *r);

/* One draw of each device algorithm, advancing the 6-word state in place. */
uint32_t bs_xorwow_next(uint32_t s[BS_RNG_WORDS]);
uint32_t bs_lfsr_next(uint32_t s[BS_RNG_WORDS]);
uint32_t bs_pcg32_next(uint32_t s[BS_RNG_WORDS]);
/* One Philox-4x32-10 block of the current counter (words 0-3) and key (4-5); then the
** counter is incremented. */
void     bs_philox_block(uint32_t s[BS_RNG_WORDS], uint32_t out[4]);

#endif
