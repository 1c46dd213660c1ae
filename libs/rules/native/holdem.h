/*
 * holdem.h - exact Casino Hold'em analysis (docs/rules.md section 3), C side.
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

/* Table parameters (docs/rules.md section 3; croupier_rules.tables.CasinoHoldemTable).
 * All pays are "to 1" in Ante units and are validated by the caller:
 *   ante_pay[6]      Ante pay by the player's tier (0 straight or less .. 5 royal), 0..CR_MAX_PAY
 *   aa_pay[2]        AA Bonus pay: [0] flush or better, [1] pair of aces to straight, 0..CR_MAX_PAY
 *   qualify_rank     the dealer qualifies with a pair of this rank index (0 = 2s .. 12 = As) or better
 *   call_multiple    Call bet = call_multiple x Ante, 1..CR_MAX_CALL_MULTIPLE; it wins 1:1, loses
 *                    when the dealer qualifies and is better, pushes otherwise
 * The bounds keep every net of a class (at most 24 x 1,070,190 deals) far inside int64. */
#define CR_MAX_PAY 1000000
#define CR_MAX_CALL_MULTIPLE 1000000
typedef struct {
    int64_t ante_pay[6];
    int64_t aa_pay[2];
    int qualify_rank;
    int64_t call_multiple;
} cr_holdem_params;

/* The standard table: Ante 1/2/3/10/20/100, AA Bonus 25/7, dealer qualifies with 4s, Call 2x. */
#define CR_HOLDEM_DEFAULT_PARAMS {{1, 2, 3, 10, 20, 100}, {25, 7}, 2, 2}

/* Net of calling in Ante units, summed over the deals counted in cnt:
 *   sum nq[t] * ante[t] + sum win[t] * (ante[t] + m) - (1 + m) * lose   (m = call_multiple). */
int64_t cr_call_net(const cr_holdem_params *p, const uint64_t cnt[CR_NCNT]);

/* The decision rule, "call iff the expected net of calling > that of folding", over n deals
 * (n = sum of cnt) whose five-card AA Bonus outcome is aa (0 flush or better, 1 aces to
 * straight, 2 lost).  Folding loses the Ante (and the AA Bonus).
 *   called[0] (Ante only):               call_net > -n
 *   called[1] (AA Bonus equal to Ante):  call_net + aa_net * n > -2n,  aa_net = aa_pay[aa] or -1 */
void cr_decide(const cr_holdem_params *p, const uint64_t cnt[CR_NCNT], uint64_t n, int aa,
               int called[2]);

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
 * cards = p0, p1, f0, f1, f2 (distinct, 0..51, validated by the caller); only
 * p->qualify_rank affects the counters.  *aa (if not NULL) gets the AA Bonus outcome. */
void cr_holdem_situation(const int cards[5], const cr_holdem_params *p, uint64_t out[CR_NCNT],
                         int *aa);

/* Full exact analysis under the table p.  sits: nsit situations of 5 cards each (validated by the
 * caller), their class counters are written to sres.
 * Returns 0 ok, -1 out of memory, -2 thread creation failed, -3 internal check failed. */
int cr_holdem_analysis(int threads, const cr_holdem_params *p, int nsit, const int *sits,
                       cr_holdem_result *res, cr_sit_result *sres);

#endif
