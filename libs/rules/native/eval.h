/*
 * eval.h - bit-mask poker hand evaluator shared by the croupier_rules._native kernels.
 *
 * Card code: rank_index * 4 + suit_index (rank 0..12 = 2..A, suit 0..3 = c,d,h,s).
 * Hand value: category << 20 | r1 << 16 | r2 << 12 | r3 << 8 | r4 << 4 | r5
 *   category 0 high card, 1 pair, 2 two pair, 3 trips, 4 straight, 5 flush,
 *   6 full house, 7 quads, 8 straight flush; r1..r5 tie-breaking rank indexes,
 *   unused slots 0.  Best 5 of 5, 6 or 7 cards; higher is better, equal ties.
 *
 * The evaluator works on four 13-bit per-suit rank masks.  With at most 7 cards a
 * flush (>= 5 cards of one suit) excludes quads and full houses, so a flush is
 * checked first.  Rank multiplicities come from bitwise AND/OR of the suit masks.
 * Tables (built once by cr_init_tables, 8192 entries each):
 *   cr_top5[m]     the (up to) five highest set bits of m packed as r1<<16|..|r5;
 *                  >> 8 gives the top three packed at 8/4/0, >> 12 the top two, ...
 *   cr_straight[m] 1 + rank index of the top card of the best straight in m, 0 if none
 *   cr_popcnt[m]   number of set bits
 */
#ifndef CROUPIER_EVAL_H
#define CROUPIER_EVAL_H

#include <stdint.h>

extern uint32_t cr_top5[8192];
extern uint8_t cr_straight[8192];
extern uint8_t cr_popcnt[8192];

void cr_init_tables(void);

/* Smallest qualifying dealer hand for a pair of rank index r (0 = 2s .. 12 = As):
 * category 1, r1 = r.  Every value >= it (that pair with any kickers, or better) qualifies. */
#define CR_QUALIFY_VALUE(r) ((1u << 20) | ((uint32_t)(r) << 16))

#define CR_CAT(v) ((v) >> 20)

static inline int cr_topbit(uint32_t x) { return 31 - __builtin_clz(x); }

static inline uint32_t cr_eval_masks(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3)
{
    uint32_t fm = 0;
    if (cr_popcnt[s0] >= 5)
        fm = s0;
    else if (cr_popcnt[s1] >= 5)
        fm = s1;
    else if (cr_popcnt[s2] >= 5)
        fm = s2;
    else if (cr_popcnt[s3] >= 5)
        fm = s3;
    if (fm) {
        uint32_t st = cr_straight[fm];
        if (st)
            return (8u << 20) | ((st - 1) << 16);
        return (5u << 20) | cr_top5[fm];
    }
    uint32_t o01 = s0 | s1, o23 = s2 | s3, x01 = s0 & s1, x23 = s2 & s3;
    uint32_t all = o01 | o23;
    uint32_t four = x01 & x23;
    if (four) {
        int q = cr_topbit(four);
        return (7u << 20) | ((uint32_t)q << 16) | ((uint32_t)cr_topbit(all & ~(1u << q)) << 12);
    }
    uint32_t three = (x01 & o23) | (x23 & o01);
    uint32_t two = x01 | x23 | (o01 & o23);
    uint32_t pairs = two & ~three;
    if (three) {
        int t = cr_topbit(three);
        uint32_t rest = (three & ~(1u << t)) | pairs;
        if (rest)
            return (6u << 20) | ((uint32_t)t << 16) | ((uint32_t)cr_topbit(rest) << 12);
        uint32_t st = cr_straight[all];
        if (st)
            return (4u << 20) | ((st - 1) << 16);
        return (3u << 20) | ((uint32_t)t << 16) | ((cr_top5[all & ~(1u << t)] >> 12) << 8);
    }
    uint32_t st = cr_straight[all];
    if (st)
        return (4u << 20) | ((st - 1) << 16);
    if (pairs) {
        int h = cr_topbit(pairs);
        uint32_t p2 = pairs & ~(1u << h);
        if (p2) {
            int l = cr_topbit(p2);
            return (2u << 20) | ((uint32_t)h << 16) | ((uint32_t)l << 12) |
                   ((uint32_t)cr_topbit(all & ~((1u << h) | (1u << l))) << 8);
        }
        return (1u << 20) | ((uint32_t)h << 16) | ((cr_top5[all & ~(1u << h)] >> 8) << 4);
    }
    return cr_top5[all];
}

/* Ante-table tier of a player's final value: 0 straight or less, 1 flush,
 * 2 full house, 3 quads, 4 straight flush, 5 royal flush. */
static inline int cr_tier(uint32_t v)
{
    uint32_t c = CR_CAT(v);
    if (c <= 4)
        return 0;
    if (c < 8)
        return (int)c - 4;
    return ((v >> 16) & 15) == 12 ? 5 : 4;
}

/* AA Bonus outcome of a 5-card value: 0 flush or better, 1 pair of aces up to a
 * straight, 2 lost. */
static inline int cr_aa_outcome(uint32_t v5)
{
    uint32_t c = CR_CAT(v5);
    if (c >= 5)
        return 0;
    if (c >= 2 || (c == 1 && ((v5 >> 16) & 15) == 12))
        return 1;
    return 2;
}

#endif
