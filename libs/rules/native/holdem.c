/*
 * holdem.c - exact Casino Hold'em analysis (docs/rules.md section 3).
 *
 * A deal is (P, F, T R, D): player hole pair, flop, turn+river, dealer hole pair, all
 * disjoint: 1326 * 19600 * 1081 * 990 = 27,813,810,024,000 deals.  The player decides
 * per situation (P, F).
 *
 * Method.
 *  1. Situation classes.  A situation (P, F) is described by its four per-suit keys
 *     k[s] = F_s << 13 | P_s (13-bit rank masks of the flop / hole cards in suit s).
 *     Permuting suits permutes the keys, so the class of a situation under suit
 *     permutation is the sorted multiset of its keys; the representative is the
 *     situation whose keys are already non-increasing in suit order.  Class ids are
 *     assigned in (flop colex index, pair colex index) order of the representatives,
 *     so all classes of one canonical flop are contiguous.  A table
 *     cls[f_idx * 1326 + p_idx] maps every concrete situation to its class id
 *     (22100 x 1326 x 4 bytes = 117 MB), class_size[] counts the concrete situations of each class.
 *  2. Boards.  Every 5-card board B with non-increasing per-suit masks is the unique
 *     representative of its suit-permutation orbit (134,459 of them), orbit size
 *     w = 24 / prod(multiplicity!) of equal masks.  For a representative B the 1081
 *     hole pairs from the other 47 cards are ranked, sorted (radix), and a sweep
 *     with per-card counters gives, for every pair P, the numbers of the 990 dealer
 *     pairs disjoint from B u P that do not qualify / qualify and lose to P / tie /
 *     beat P.  For each of the 10 splits of B into flop F (3) + turn-river (2),
 *     w x those counters are added into the accumulator of class(P, F).  Applying a
 *     suit permutation to a whole deal maps a class onto itself and leaves payoffs
 *     unchanged, so a class accumulator ends up holding the exact sum over all
 *     concrete deals whose situation is in that class (checked: every class total is
 *     exactly class_size * 1081 * 990).
 *  3. Decisions (cr_decide).  Per class, with N = class_size * 1081 * 990 deals, m the
 *     call multiple and ante[t] / aa_pay / the qualifying pair from the table parameters,
 *     call_net = sum nq[t] * ante[t] + sum win[t] * (ante[t] + m) - (1 + m) * lose
 *     (ante units: the Call bet is m x Ante and wins 1:1, i.e. +m; a loss costs 1 + m)
 *     ante-only strategy calls iff call_net > -N (fold loses the Ante);
 *     with an AA Bonus equal to the Ante, call iff call_net + aa_pay * N > -2N.
 * Boards are shared between threads with an atomic counter, each thread has its own
 * uint32 accumulators (16 per class, 64-byte aligned), merged at the end.
 */
#include "holdem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"

#define NPAIRS 1081
#define NFLOPS 22100 /* C(52,3) concrete flops; 19600 = C(50,3) of them avoid a given pair */
#define NHOLE 1326
#define SLOTS 16 /* uint32 per class accumulator (14 used) */

static inline uint32_t colex2(int a, int b) /* a < b */
{
    return (uint32_t)(a + b * (b - 1) / 2);
}

static inline uint32_t colex3(int a, int b, int c) /* a < b < c */
{
    return (uint32_t)(a + b * (b - 1) / 2 + c * (c - 1) * (c - 2) / 6);
}

static inline void sort_small(int *x, int n)
{
    for (int i = 1; i < n; i++) {
        int v = x[i], j = i - 1;
        while (j >= 0 && x[j] > v) {
            x[j + 1] = x[j];
            j--;
        }
        x[j + 1] = v;
    }
}

static inline uint32_t eval_cards(const int *c, int n)
{
    uint32_t m[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; i++)
        m[c[i] & 3] |= 1u << (c[i] >> 2);
    return cr_eval_masks(m[0], m[1], m[2], m[3]);
}

/* ------------------------------------------------------------------ decisions */

int64_t cr_call_net(const cr_holdem_params *p, const uint64_t cnt[CR_NCNT])
{
    int64_t m = p->call_multiple;
    int64_t net = -(1 + m) * (int64_t)cnt[CR_LOSE];
    for (int t = 0; t < 6; t++)
        net += (int64_t)cnt[CR_NQ + t] * p->ante_pay[t] + (int64_t)cnt[CR_WIN + t] * (p->ante_pay[t] + m);
    return net;
}

void cr_decide(const cr_holdem_params *p, const uint64_t cnt[CR_NCNT], uint64_t n, int aa,
               int called[2])
{
    int64_t net = cr_call_net(p, cnt), nn = (int64_t)n;
    int64_t aa_net = aa < 2 ? p->aa_pay[aa] : -1;
    called[0] = net > -nn;
    called[1] = net + aa_net * nn > -2 * nn;
}

/* ------------------------------------------------------------------ brute force */

void cr_holdem_situation(const int cards[5], const cr_holdem_params *p, uint64_t out[CR_NCNT],
                         int *aa)
{
    const uint32_t qualify = CR_QUALIFY_VALUE(p->qualify_rank);
    memset(out, 0, sizeof(uint64_t) * CR_NCNT);
    if (aa)
        *aa = cr_aa_outcome(eval_cards(cards, 5));
    uint64_t used = 0;
    for (int i = 0; i < 5; i++)
        used |= 1ull << cards[i];
    int rem[47], n = 0;
    for (int c = 0; c < 52; c++)
        if (!(used & (1ull << c)))
            rem[n++] = c;
    uint32_t fm[4] = {0, 0, 0, 0}, pm[4];
    for (int i = 2; i < 5; i++)
        fm[cards[i] & 3] |= 1u << (cards[i] >> 2);
    memcpy(pm, fm, sizeof pm);
    for (int i = 0; i < 2; i++)
        pm[cards[i] & 3] |= 1u << (cards[i] >> 2);
    for (int ti = 0; ti < 47; ti++)
        for (int ri = ti + 1; ri < 47; ri++) {
            int t = rem[ti], r = rem[ri];
            uint32_t bm[4];
            memcpy(bm, fm, sizeof bm);
            bm[t & 3] |= 1u << (t >> 2);
            bm[r & 3] |= 1u << (r >> 2);
            uint32_t pv[4];
            memcpy(pv, pm, sizeof pv);
            pv[t & 3] |= 1u << (t >> 2);
            pv[r & 3] |= 1u << (r >> 2);
            uint32_t vp = cr_eval_masks(pv[0], pv[1], pv[2], pv[3]);
            int tier = cr_tier(vp);
            for (int ai = 0; ai < 47; ai++) {
                if (ai == ti || ai == ri)
                    continue;
                for (int bi = ai + 1; bi < 47; bi++) {
                    if (bi == ti || bi == ri)
                        continue;
                    int a = rem[ai], b = rem[bi];
                    uint32_t dm[4];
                    memcpy(dm, bm, sizeof dm);
                    dm[a & 3] |= 1u << (a >> 2);
                    dm[b & 3] |= 1u << (b >> 2);
                    uint32_t vd = cr_eval_masks(dm[0], dm[1], dm[2], dm[3]);
                    if (vd < qualify)
                        out[CR_NQ + tier]++;
                    else if (vp > vd)
                        out[CR_WIN + tier]++;
                    else if (vp == vd)
                        out[CR_TIE]++;
                    else
                        out[CR_LOSE]++;
                }
            }
        }
}

/* ------------------------------------------------------------ class table */

typedef struct {
    uint32_t *cls;        /* NFLOPS * NHOLE -> class id (~117 MB) (UINT32_MAX if overlapping) */
    uint32_t *rep;        /* class id -> f_idx * NHOLE + p_idx of the representative */
    uint8_t *size;        /* class id -> number of concrete situations */
    uint32_t n;
    int flop[NFLOPS][3];  /* colex index -> cards */
    int hole[NHOLE][2];
} class_table;

static void free_table(class_table *t)
{
    free(t->cls);
    free(t->rep);
    free(t->size);
    free(t);
}

static class_table *build_table(void)
{
    class_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cls = malloc(sizeof(uint32_t) * NFLOPS * NHOLE);
    uint32_t cap = 1u << 21;
    t->rep = malloc(sizeof(uint32_t) * cap);
    if (!t->cls || !t->rep) {
        free_table(t);
        return NULL;
    }
    for (int c = 2; c < 52; c++)
        for (int b = 1; b < c; b++)
            for (int a = 0; a < b; a++) {
                uint32_t i = colex3(a, b, c);
                t->flop[i][0] = a, t->flop[i][1] = b, t->flop[i][2] = c;
            }
    for (int b = 1; b < 52; b++)
        for (int a = 0; a < b; a++) {
            uint32_t i = colex2(a, b);
            t->hole[i][0] = a, t->hole[i][1] = b;
        }
    /* pass 1: representatives get ids in (f, p) order */
    uint32_t n = 0;
    for (int f = 0; f < NFLOPS; f++) {
        const int *fc = t->flop[f];
        uint64_t fbits = (1ull << fc[0]) | (1ull << fc[1]) | (1ull << fc[2]);
        uint32_t fm[4] = {0, 0, 0, 0};
        for (int i = 0; i < 3; i++)
            fm[fc[i] & 3] |= 1u << (fc[i] >> 2);
        uint32_t *row = t->cls + (size_t)f * NHOLE;
        for (int p = 0; p < NHOLE; p++) {
            const int *pc = t->hole[p];
            if (fbits & ((1ull << pc[0]) | (1ull << pc[1]))) {
                row[p] = UINT32_MAX;
                continue;
            }
            uint32_t k[4];
            for (int s = 0; s < 4; s++)
                k[s] = fm[s] << 13;
            k[pc[0] & 3] |= 1u << (pc[0] >> 2);
            k[pc[1] & 3] |= 1u << (pc[1] >> 2);
            if (k[0] >= k[1] && k[1] >= k[2] && k[2] >= k[3]) {
                if (n == cap) {
                    cap *= 2;
                    uint32_t *r = realloc(t->rep, sizeof(uint32_t) * cap);
                    if (!r) {
                        free_table(t);
                        return NULL;
                    }
                    t->rep = r;
                }
                t->rep[n] = (uint32_t)f * NHOLE + (uint32_t)p;
                row[p] = n++;
            } else {
                row[p] = UINT32_MAX - 1; /* filled in pass 2 */
            }
        }
    }
    t->n = n;
    t->size = calloc(n, 1);
    if (!t->size) {
        free_table(t);
        return NULL;
    }
    /* pass 2: map every other situation onto its representative */
    for (int f = 0; f < NFLOPS; f++) {
        const int *fc = t->flop[f];
        uint32_t fm[4] = {0, 0, 0, 0};
        for (int i = 0; i < 3; i++)
            fm[fc[i] & 3] |= 1u << (fc[i] >> 2);
        uint32_t *row = t->cls + (size_t)f * NHOLE;
        for (int p = 0; p < NHOLE; p++) {
            if (row[p] == UINT32_MAX)
                continue;
            if (row[p] != UINT32_MAX - 1) {
                t->size[row[p]]++;
                continue;
            }
            const int *pc = t->hole[p];
            uint32_t k[4];
            for (int s = 0; s < 4; s++)
                k[s] = fm[s] << 13;
            k[pc[0] & 3] |= 1u << (pc[0] >> 2);
            k[pc[1] & 3] |= 1u << (pc[1] >> 2);
            /* sort keys non-increasing: new suit i gets the i-th largest key */
            for (int i = 1; i < 4; i++) {
                uint32_t v = k[i];
                int j = i - 1;
                while (j >= 0 && k[j] < v) {
                    k[j + 1] = k[j];
                    j--;
                }
                k[j + 1] = v;
            }
            int fcards[3], pcards[2], nf = 0, np = 0;
            for (int s = 0; s < 4; s++) {
                uint32_t m = k[s] >> 13, q = k[s] & 8191;
                while (m) {
                    int r = __builtin_ctz(m);
                    m &= m - 1;
                    fcards[nf++] = r * 4 + s;
                }
                while (q) {
                    int r = __builtin_ctz(q);
                    q &= q - 1;
                    pcards[np++] = r * 4 + s;
                }
            }
            sort_small(fcards, 3);
            sort_small(pcards, 2);
            uint32_t id = t->cls[(size_t)colex3(fcards[0], fcards[1], fcards[2]) * NHOLE +
                                 colex2(pcards[0], pcards[1])];
            row[p] = id;
            t->size[id]++;
        }
    }
    return t;
}

/* ------------------------------------------------------------ board sweep */

typedef struct {
    uint8_t c[5];
    uint8_t w;
} board;

typedef struct {
    const class_table *t;
    const board *boards;
    int nboards;
    atomic_int *next;
    uint32_t qualify; /* smallest qualifying dealer value */
    uint32_t *acc;    /* t->n * SLOTS, this thread's */
} worker_arg;

static const uint16_t *radix_sort(const uint32_t *v, uint16_t *a, uint16_t *b, int n)
{
    uint32_t cnt[3][256];
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < n; i++) {
        cnt[0][v[i] & 255]++;
        cnt[1][(v[i] >> 8) & 255]++;
        cnt[2][(v[i] >> 16) & 255]++;
        a[i] = (uint16_t)i;
    }
    for (int p = 0; p < 3; p++) {
        uint32_t s = 0;
        for (int d = 0; d < 256; d++) {
            uint32_t c = cnt[p][d];
            cnt[p][d] = s;
            s += c;
        }
        int sh = 8 * p;
        for (int i = 0; i < n; i++) {
            uint16_t x = a[i];
            b[cnt[p][(v[x] >> sh) & 255]++] = x;
        }
        uint16_t *tmp = a;
        a = b;
        b = tmp;
    }
    return a;
}

static void *worker(void *argp)
{
    worker_arg *arg = argp;
    const class_table *t = arg->t;
    uint32_t *acc = arg->acc;
    const uint32_t qualify = arg->qualify;
    uint8_t pa[NPAIRS], pb[NPAIRS], tier[NPAIRS];
    uint16_t pidx[NPAIRS], s1[NPAIRS], s2[NPAIRS];
    uint32_t val[NPAIRS], wnq[NPAIRS], wwin[NPAIRS], wtie[NPAIRS], wlose[NPAIRS];
    int rem[47];
    for (;;) {
        int bi = atomic_fetch_add(arg->next, 1);
        if (bi >= arg->nboards)
            break;
        const board *B = &arg->boards[bi];
        uint64_t used = 0;
        uint32_t bm[4] = {0, 0, 0, 0};
        for (int i = 0; i < 5; i++) {
            used |= 1ull << B->c[i];
            bm[B->c[i] & 3] |= 1u << (B->c[i] >> 2);
        }
        int n = 0;
        for (int c = 0; c < 52; c++)
            if (!(used & (1ull << c)))
                rem[n++] = c;
        int k = 0;
        for (int j = 1; j < 47; j++)
            for (int i = 0; i < j; i++, k++) {
                int a = rem[i], b = rem[j];
                uint32_t m[4] = {bm[0], bm[1], bm[2], bm[3]};
                m[a & 3] |= 1u << (a >> 2);
                m[b & 3] |= 1u << (b >> 2);
                pa[k] = (uint8_t)a;
                pb[k] = (uint8_t)b;
                pidx[k] = (uint16_t)colex2(a, b);
                val[k] = cr_eval_masks(m[0], m[1], m[2], m[3]);
                tier[k] = (uint8_t)cr_tier(val[k]);
            }
        /* sweep */
        uint32_t nqc[52] = {0}, lessc[52] = {0}, eqc[52] = {0};
        uint32_t nq_total = 0, less_total = 0;
        for (k = 0; k < NPAIRS; k++)
            if (val[k] < qualify) {
                nq_total++;
                nqc[pa[k]]++;
                nqc[pb[k]]++;
            }
        const uint16_t *ord = radix_sort(val, s1, s2, NPAIRS);
        uint32_t w = B->w;
        for (int i = 0; i < NPAIRS;) {
            uint32_t v = val[ord[i]];
            int j = i;
            while (j < NPAIRS && val[ord[j]] == v) {
                eqc[pa[ord[j]]]++;
                eqc[pb[ord[j]]]++;
                j++;
            }
            uint32_t g = (uint32_t)(j - i);
            for (int q = i; q < j; q++) {
                int x = ord[q], a = pa[x], b = pb[x];
                uint32_t nq, win, tie, lose;
                if (v < qualify) {
                    nq = nq_total - nqc[a] - nqc[b] + 1;
                    win = tie = 0;
                    lose = 990 - nq;
                } else {
                    nq = nq_total - nqc[a] - nqc[b];
                    uint32_t less = less_total - lessc[a] - lessc[b];
                    win = less - nq;
                    tie = g - eqc[a] - eqc[b] + 1;
                    lose = 990 - less - tie;
                }
                wnq[x] = w * nq;
                wwin[x] = w * win;
                wtie[x] = w * tie;
                wlose[x] = w * lose;
            }
            for (int q = i; q < j; q++) {
                int x = ord[q];
                eqc[pa[x]] = eqc[pb[x]] = 0;
                lessc[pa[x]]++;
                lessc[pb[x]]++;
            }
            less_total += g;
            i = j;
        }
        /* 10 flop / turn-river splits */
        for (int x = 0; x < 3; x++)
            for (int y = x + 1; y < 4; y++)
                for (int z = y + 1; z < 5; z++) {
                    uint32_t f = colex3(B->c[x], B->c[y], B->c[z]);
                    const uint32_t *row = t->cls + (size_t)f * NHOLE;
                    for (k = 0; k < NPAIRS; k++) {
                        uint32_t *u = acc + (size_t)row[pidx[k]] * SLOTS;
                        u[CR_NQ + tier[k]] += wnq[k];
                        u[CR_WIN + tier[k]] += wwin[k];
                        u[CR_TIE] += wtie[k];
                        u[CR_LOSE] += wlose[k];
                    }
                }
    }
    return NULL;
}

static int factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }

static board *canonical_boards(int *count)
{
    board *bs = malloc(sizeof(board) * 140000);
    if (!bs)
        return NULL;
    int n = 0;
    int c[5];
    for (c[4] = 4; c[4] < 52; c[4]++)
        for (c[3] = 3; c[3] < c[4]; c[3]++)
            for (c[2] = 2; c[2] < c[3]; c[2]++)
                for (c[1] = 1; c[1] < c[2]; c[1]++)
                    for (c[0] = 0; c[0] < c[1]; c[0]++) {
                        uint32_t m[4] = {0, 0, 0, 0};
                        for (int i = 0; i < 5; i++)
                            m[c[i] & 3] |= 1u << (c[i] >> 2);
                        if (!(m[0] >= m[1] && m[1] >= m[2] && m[2] >= m[3]))
                            continue;
                        int stab = 1, run = 1;
                        for (int s = 1; s < 4; s++) {
                            if (m[s] == m[s - 1])
                                run++;
                            else {
                                stab *= factorial(run);
                                run = 1;
                            }
                        }
                        stab *= factorial(run);
                        if (n == 140000) {
                            free(bs);
                            return NULL;
                        }
                        for (int i = 0; i < 5; i++)
                            bs[n].c[i] = (uint8_t)c[i];
                        bs[n].w = (uint8_t)(24 / stab);
                        n++;
                    }
    *count = n;
    return bs;
}

int cr_holdem_analysis(int threads, const cr_holdem_params *p, int nsit, const int *sits,
                       cr_holdem_result *res, cr_sit_result *sres)
{
    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    memset(res, 0, sizeof *res);
    int rc = 0;
    int nboards = 0;
    board *boards = canonical_boards(&nboards);
    class_table *t = boards ? build_table() : NULL;
    uint32_t *acc[64] = {0};
    if (!boards || !t) {
        free(boards);
        if (t)
            free_table(t);
        return -1;
    }
    size_t accbytes = ((size_t)t->n * SLOTS * sizeof(uint32_t) + 63) / 64 * 64;
    for (int i = 0; i < threads; i++) {
        acc[i] = aligned_alloc(64, accbytes);
        if (!acc[i]) {
            rc = -1;
            goto done;
        }
        memset(acc[i], 0, accbytes);
    }
    atomic_int next = 0;
    worker_arg args[64];
    pthread_t tid[64];
    int started = 0;
    for (int i = 0; i < threads; i++) {
        args[i] = (worker_arg){t, boards, nboards, &next, CR_QUALIFY_VALUE(p->qualify_rank), acc[i]};
        if (i > 0) {
            if (pthread_create(&tid[i], NULL, worker, &args[i]) != 0) {
                rc = -2;
                break;
            }
            started++;
        }
    }
    if (rc == 0)
        worker(&args[0]);
    else
        atomic_store(&next, nboards); /* let started threads finish quickly */
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
    if (rc)
        goto done;
    for (int i = 1; i < threads; i++) {
        const uint32_t *src = acc[i];
        uint32_t *dst = acc[0];
        for (size_t j = 0; j < (size_t)t->n * SLOTS; j++)
            dst[j] += src[j];
    }

    res->deals_total = CR_SITUATIONS_TOTAL * CR_CONT_PER_SITUATION;
    res->classes = t->n;
    res->boards_canonical = (uint64_t)nboards;
    uint8_t *called = malloc((size_t)t->n * 2);
    if (!called) {
        rc = -1;
        goto done;
    }
    uint64_t situations = 0;
    for (uint32_t id = 0; id < t->n; id++) {
        const uint32_t *u = acc[0] + (size_t)id * SLOTS;
        uint64_t n = 0, cnt[CR_NCNT];
        for (int s = 0; s < CR_NCNT; s++) {
            cnt[s] = u[s];
            n += u[s];
        }
        uint64_t size = t->size[id];
        situations += size;
        if (size == 0 || n != size * CR_CONT_PER_SITUATION) {
            rc = -3;
            free(called);
            goto done;
        }
        uint32_t r = t->rep[id];
        const int *fc = t->flop[r / NHOLE], *pc = t->hole[r % NHOLE];
        int five[5] = {pc[0], pc[1], fc[0], fc[1], fc[2]};
        int aa = cr_aa_outcome(eval_cards(five, 5));
        int call[2];
        cr_decide(p, cnt, n, aa, call);
        called[2 * id] = (uint8_t)call[0];
        called[2 * id + 1] = (uint8_t)call[1];
        for (int sidx = 0; sidx < 2; sidx++) {
            cr_strategy *st = &res->strat[sidx];
            if (call[sidx]) {
                st->situations_called += size;
                st->classes_called++;
                for (int s = 0; s < CR_NCNT; s++)
                    st->cnt[s] += u[s];
                st->aa[aa] += n;
            } else {
                st->situations_folded += size;
                st->classes_folded++;
                st->fold_deals += n;
            }
        }
    }
    res->situations_total = situations;
    if (situations != CR_SITUATIONS_TOTAL)
        rc = -3;
    for (int i = 0; rc == 0 && i < nsit; i++) {
        const int *c = sits + 5 * i;
        int f[3] = {c[2], c[3], c[4]}, p[2] = {c[0], c[1]};
        sort_small(f, 3);
        sort_small(p, 2);
        uint32_t id = t->cls[(size_t)colex3(f[0], f[1], f[2]) * NHOLE + colex2(p[0], p[1])];
        const uint32_t *u = acc[0] + (size_t)id * SLOTS;
        sres[i].class_id = id;
        sres[i].class_size = t->size[id];
        for (int s = 0; s < CR_NCNT; s++) {
            if (u[s] % t->size[id])
                rc = -3;
            sres[i].cnt[s] = u[s] / t->size[id];
        }
        sres[i].called[0] = called[2 * id];
        sres[i].called[1] = called[2 * id + 1];
    }
    free(called);
    /* AA Bonus over all five-card hands */
    {
        int c[5];
        for (c[4] = 4; c[4] < 52; c[4]++)
            for (c[3] = 3; c[3] < c[4]; c[3]++)
                for (c[2] = 2; c[2] < c[3]; c[2]++)
                    for (c[1] = 1; c[1] < c[2]; c[1]++)
                        for (c[0] = 0; c[0] < c[1]; c[0]++)
                            res->aa5[cr_aa_outcome(eval_cards(c, 5))]++;
    }
done:
    for (int i = 0; i < threads; i++)
        free(acc[i]);
    free(boards);
    free_table(t);
    return rc;
}
