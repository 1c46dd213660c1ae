/*
 * holdem.h - exact Casino Hold'em analysis (RULES.md section 3), C side.
 * See holdem.c for the method and native.c for the Python-facing dict layout.
 */
#ifndef CROUPIER_HOLDEM_H
#define CROUPIER_HOLDEM_H

#include <stdint.h>

/* Counter layout for one situation / one class / one strategy (CR_NCNT slots):
 *   [0..5]   dealer does not qualify, by the player's Ante-table tier
 *   [6..11]  dealer qualifies and the player wins, by tier
 *   [12]     tie (dealer qualifies, equal hands)
 *   [13]     dealer qualifies and beats the player
 * Tier: 0 straight or less, 1 flush, 2 full house, 3 quads, 4 straight flush, 5 royal. */
#define CR_NCNT 14
#define CR_NQ 0
#define CR_WIN 6
#define CR_TIE 12
#define CR_LOSE 13

#define CR_CONT_PER_SITUATION (1081ull * 990ull) /* (turn, river) x dealer pairs */
#define CR_SITUATIONS_TOTAL (1326ull * 19600ull)

typedef struct {
    uint64_t situations_called, situations_folded; /* concrete (P, F) situations */
    uint64_t classes_called, classes_folded;       /* suit-canonical classes */
    uint64_t fold_deals;                           /* deals in folded situations */
    uint64_t cnt[CR_NCNT];                         /* outcomes of called deals */
    uint64_t aa[3];                                /* AA outcome of called deals */
} cr_strategy;

typedef struct {
    uint64_t deals_total;
    uint64_t situations_total;
    uint64_t classes;
    uint64_t boards_canonical;
    cr_strategy strat[2]; /* 0 ante only, 1 with an AA Bonus equal to the Ante */
    uint64_t aa5[3];      /* AA outcome over all C(52,5) five-card hands */
} cr_holdem_result;

typedef struct {
    uint32_t class_id, class_size;
    uint64_t cnt[CR_NCNT]; /* per concrete situation (class total / class size) */
    int called[2];
} cr_sit_result;

/* Brute force over all 1081 x 990 continuations of one concrete situation.
 * cards = p0, p1, f0, f1, f2 (distinct, 0..51, validated by the caller). */
void cr_holdem_situation(const int cards[5], uint64_t out[CR_NCNT]);

/* Full exact analysis.  sits: nsit situations of 5 cards each (validated by the
 * caller), their class counters are written to sres.
 * Returns 0 ok, -1 out of memory, -2 thread creation failed, -3 internal check failed. */
int cr_holdem_analysis(int threads, int nsit, const int *sits, cr_holdem_result *res,
                       cr_sit_result *sres);

#endif
