/*
 * croupier_rules._native - native kernels of the rules library.
 *
 * Card code: rank_index * 4 + suit_index, rank 0..12 = 2,3,4,5,6,7,8,9,T,J,Q,K,A,
 * suit 0..3 = c,d,h,s.  Hand value: category << 20 | r1 << 16 | r2 << 12 | r3 << 8 |
 * r4 << 4 | r5 (see eval.h), higher is better, equal ties; best 5 of 5..7 cards.
 *
 * Functions
 *   rank(cards) -> int
 *       One hand: a sequence of 5..7 distinct int card codes.  TypeError for
 *       non-ints, ValueError for bad length / codes / duplicates.
 *   rank_batch(cards, n_per_hand, out, threads=2) -> None
 *       cards: C-contiguous bytes-like of uint8 codes (itemsize 1), length
 *       hands * n_per_hand, n_per_hand in 5..7.  out: writable C-contiguous buffer
 *       of 4-byte integers (array('I'), array('i'), memoryview cast 'I', ...) with
 *       exactly `hands` items; out[i] = value of hand i.  The GIL is released; batches
 *       of >= 32768 hands are split over `threads` pthreads (1..16).  A card code
 *       > 51 or a card repeated within a hand raises ValueError naming the first
 *       offending hand (out is then partially written).
 *   category_counts(n) -> list[int] of 9
 *       Exhaustive category counts over all C(52, n) hands, n in 5, 6, 7
 *       (2 threads, GIL released).
 *   Table parameters (keyword-only, both Hold'em functions; defaults = the standard table):
 *       ante_pays=(1, 2, 3, 10, 20, 100)  6 ints, Ante pay (to 1) by the player's tier:
 *                                          straight or less, flush, full house, quads,
 *                                          straight flush, royal flush; each 0..1,000,000
 *       aa_pays=(25, 7)                    2 ints, AA Bonus pay (to 1): flush or better,
 *                                          pair of aces to straight; each 0..1,000,000
 *       qualify_pair_rank=2                the dealer qualifies with a pair of this rank
 *                                          index (0 = 2s .. 12 = As) or better
 *       call_multiple=2                    Call bet = call_multiple x Ante (1..1,000,000);
 *                                          wins 1:1, loses to a better qualifying dealer,
 *                                          pushes when the dealer does not qualify or ties
 *       ValueError for a wrong length or an out-of-range value, TypeError for non-ints.
 *   holdem_situation(p0, p1, f0, f1, f2, *, <table parameters>) -> dict
 *       Brute force over all 1081 x 990 (turn-river, dealer pair) continuations of
 *       one concrete Casino Hold'em situation: {"nq": [6], "win": [6], "tie": int,
 *       "lose": int} (layout below, depends on qualify_pair_rank only), summing to
 *       1,070,190, plus "call_net" (net of calling summed over those continuations, Ante
 *       units) and "called": {"ante_only": bool, "with_aa_bonus": bool}, the decision
 *       under the same rule as holdem_analysis.
 *   holdem_analysis(threads=2, situations=None, *, <table parameters>) -> dict
 *       Exact analysis of Casino Hold'em (docs/rules.md section 3) over all
 *       27,813,810,024,000 concrete deals (method: holdem.c).  Keys (all ints):
 *         "deals_total"        1326 * 19600 * 1081 * 990
 *         "situations_total"   concrete (hole pair, flop) situations = 25,989,600
 *         "classes"            suit-permutation classes of situations
 *         "boards_canonical"   suit-canonical 5-card boards enumerated (134,459)
 *         "ante_only", "with_aa_bonus": per strategy (best play for an Ante-only
 *             bet / for Ante + AA Bonus of the same size; call iff the expected net
 *             of calling > that of folding, i.e. > -1 resp. > -2 ante units, under
 *             the table parameters given):
 *             "situations_called", "situations_folded": concrete situations
 *             "classes_called", "classes_folded": classes
 *             "fold":  deals in folded situations (1,070,190 per situation)
 *             "nq":    [6] called deals where the dealer does not qualify, by the
 *                      player's Ante-table tier (Ante paid by the table, Call push)
 *             "win":   [6] called deals, dealer qualifies, player better, by tier
 *                      (Ante paid by the table, the call_multiple-unit Call wins 1:1)
 *             "tie":   called deals, dealer qualifies, equal hands (push)
 *             "lose":  called deals, dealer qualifies and is better (-1 - call_multiple)
 *             "aa":    {"flush_or_better", "aces_to_straight", "lost"}: AA Bonus
 *                      outcome (on hole + flop) of the called deals (reported for
 *                      "ante_only" too, for reference)
 *           fold + sum(nq) + sum(win) + tie + lose == deals_total; the aa counts
 *           sum to the called deals.  Tier: 0 straight or less, 1 flush, 2 full house,
 *           3 quads, 4 straight flush, 5 royal flush (standard pays 1, 2, 3, 10, 20, 100).
 *         "aa_bonus_five_card": {"flush_or_better", "aces_to_straight", "lost",
 *             "total": 2598960} over all five-card hands.
 *         "situations" (only when `situations` is given): one dict per requested
 *             situation (p0, p1, f0, f1, f2) with "cards" (the tuple), "class_id",
 *             "class_size" (concrete situations in its class), "nq", "win", "tie",
 *             "lose" (class totals divided by class_size, i.e. the counters of ONE
 *             concrete situation - comparable with holdem_situation) and "called":
 *             {"ante_only": bool, "with_aa_bonus": bool}.
 *       Runs with the GIL released; about 0.5 GB of memory for two threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "eval.h"
#include "holdem.h"

uint32_t cr_top5[8192];
uint8_t cr_straight[8192];
uint8_t cr_popcnt[8192];

void cr_init_tables(void)
{
    for (uint32_t m = 0; m < 8192; m++) {
        int cnt = 0;
        uint32_t packed = 0;
        for (int r = 12; r >= 0; r--)
            if (m & (1u << r)) {
                if (cnt < 5)
                    packed |= (uint32_t)r << (16 - 4 * cnt);
                cnt++;
            }
        cr_popcnt[m] = (uint8_t)cnt;
        cr_top5[m] = packed;
        uint8_t st = 0;
        for (int top = 12; top >= 4 && !st; top--)
            if (((m >> (top - 4)) & 31u) == 31u)
                st = (uint8_t)(top + 1);
        if (!st && (m & 0x100Fu) == 0x100Fu) /* A-2-3-4-5: top card the five */
            st = 3 + 1;
        cr_straight[m] = st;
    }
}

/* ------------------------------------------------------------------ batch */

static inline __attribute__((always_inline)) Py_ssize_t
rank_range_n(const uint8_t *cards, const int n, uint32_t *out, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t h = lo; h < hi; h++) {
        const uint8_t *c = cards + h * n;
        uint32_t m[4] = {0, 0, 0, 0};
        uint64_t seen = 0;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            uint32_t x = c[i];
            bad |= x >= 52;
            uint64_t bit = 1ull << (x & 63);
            bad |= (seen & bit) != 0;
            seen |= bit;
            m[x & 3] |= 1u << ((x >> 2) & 15);
        }
        if (__builtin_expect(bad, 0))
            return h;
        out[h] = cr_eval_masks(m[0] & 8191, m[1] & 8191, m[2] & 8191, m[3] & 8191);
    }
    return -1;
}

static Py_ssize_t rank_range(const uint8_t *cards, int n, uint32_t *out, Py_ssize_t lo,
                             Py_ssize_t hi)
{
    switch (n) {
    case 5:
        return rank_range_n(cards, 5, out, lo, hi);
    case 6:
        return rank_range_n(cards, 6, out, lo, hi);
    default:
        return rank_range_n(cards, 7, out, lo, hi);
    }
}

typedef struct {
    const uint8_t *cards;
    int n;
    uint32_t *out;
    Py_ssize_t lo, hi, err;
} batch_arg;

static void *batch_worker(void *p)
{
    batch_arg *a = p;
    a->err = rank_range(a->cards, a->n, a->out, a->lo, a->hi);
    return NULL;
}

static int out_format_ok(const Py_buffer *v)
{
    if (v->itemsize != 4)
        return 0;
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || (*f == '<' && PY_LITTLE_ENDIAN) || (*f == '>' && PY_BIG_ENDIAN))
        f++;
    return (f[0] == 'I' || f[0] == 'i' || f[0] == 'L' || f[0] == 'l') && f[1] == '\0';
}

static PyObject *py_rank_batch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cards", "n_per_hand", "out", "threads", NULL};
    PyObject *cards_obj, *out_obj;
    int n, threads = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiO|i:rank_batch", kwlist, &cards_obj, &n,
                                     &out_obj, &threads))
        return NULL;
    if (n < 5 || n > 7) {
        PyErr_Format(PyExc_ValueError, "n_per_hand must be 5, 6 or 7, got %d", n);
        return NULL;
    }
    if (threads < 1 || threads > 16) {
        PyErr_Format(PyExc_ValueError, "threads must be in 1..16, got %d", threads);
        return NULL;
    }
    Py_buffer cv, ov;
    if (PyObject_GetBuffer(cards_obj, &cv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (cv.itemsize != 1) {
        PyErr_Format(PyExc_ValueError,
                     "cards must be a buffer of uint8 card codes (itemsize 1), got itemsize %zd",
                     cv.itemsize);
        PyBuffer_Release(&cv);
        return NULL;
    }
    if (cv.len % n != 0) {
        PyErr_Format(PyExc_ValueError,
                     "cards has %zd bytes, not a multiple of n_per_hand=%d", cv.len, n);
        PyBuffer_Release(&cv);
        return NULL;
    }
    Py_ssize_t hands = cv.len / n;
    if (PyObject_GetBuffer(out_obj, &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&cv);
        return NULL;
    }
    if (!out_format_ok(&ov)) {
        PyErr_Format(PyExc_ValueError,
                     "out must be a writable buffer of native 4-byte integers (e.g. array('I')), "
                     "got format '%s' with itemsize %zd",
                     ov.format ? ov.format : "B", ov.itemsize);
        goto fail;
    }
    if (ov.len / 4 != hands) {
        PyErr_Format(PyExc_ValueError, "out has %zd items but cards holds %zd hands of %d cards",
                     ov.len / 4, hands, n);
        goto fail;
    }
    const uint8_t *cards = cv.buf;
    uint32_t *out = ov.buf;
    Py_ssize_t err = -1;
    if (threads > 1 && hands >= 32768) {
        batch_arg a[16];
        pthread_t tid[16];
        int started[16] = {0};
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < threads; i++) {
            a[i] = (batch_arg){cards, n, out, hands * i / threads, hands * (i + 1) / threads, -1};
            if (i > 0)
                started[i] = pthread_create(&tid[i], NULL, batch_worker, &a[i]) == 0;
        }
        batch_worker(&a[0]);
        for (int i = 1; i < threads; i++) {
            if (started[i])
                pthread_join(tid[i], NULL);
            else
                batch_worker(&a[i]);
        }
        Py_END_ALLOW_THREADS
        for (int i = 0; i < threads && err < 0; i++)
            err = a[i].err;
    } else {
        Py_BEGIN_ALLOW_THREADS
        err = rank_range(cards, n, out, 0, hands);
        Py_END_ALLOW_THREADS
    }
    if (err >= 0) {
        const uint8_t *c = cards + err * n;
        uint64_t seen = 0;
        for (int i = 0; i < n; i++) {
            if (c[i] >= 52) {
                PyErr_Format(PyExc_ValueError,
                             "card code %d at position %zd (hand %zd) is not in 0..51", c[i],
                             err * n + i, err);
                break;
            }
            if (seen & (1ull << c[i])) {
                PyErr_Format(PyExc_ValueError, "hand %zd contains card %d more than once", err,
                             c[i]);
                break;
            }
            seen |= 1ull << c[i];
        }
        goto fail;
    }
    PyBuffer_Release(&cv);
    PyBuffer_Release(&ov);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&cv);
    PyBuffer_Release(&ov);
    return NULL;
}

/* Parse a sequence of `lo`..`hi` distinct card codes into c; returns count or -1. */
static int parse_cards(PyObject *seq_obj, int lo, int hi, int *c, const char *what)
{
    PyObject *seq = PySequence_Fast(seq_obj, "cards must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < lo || n > hi) {
        if (lo == hi)
            PyErr_Format(PyExc_ValueError, "%s needs exactly %d cards, got %zd", what, lo, n);
        else
            PyErr_Format(PyExc_ValueError, "%s needs %d to %d cards, got %zd", what, lo, hi, n);
        Py_DECREF(seq);
        return -1;
    }
    uint64_t seen = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "card codes must be ints, got %.100s",
                         Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        int overflow;
        long v = PyLong_AsLongAndOverflow(item, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (overflow || v < 0 || v > 51) {
            PyErr_Format(PyExc_ValueError, "card code %R is not in 0..51", item);
            Py_DECREF(seq);
            return -1;
        }
        if (seen & (1ull << v)) {
            PyErr_Format(PyExc_ValueError, "card %ld appears more than once", v);
            Py_DECREF(seq);
            return -1;
        }
        seen |= 1ull << v;
        c[i] = (int)v;
    }
    Py_DECREF(seq);
    return (int)n;
}

static PyObject *py_rank(PyObject *self, PyObject *arg)
{
    int c[7];
    int n = parse_cards(arg, 5, 7, c, "rank");
    if (n < 0)
        return NULL;
    uint32_t m[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; i++)
        m[c[i] & 3] |= 1u << (c[i] >> 2);
    return PyLong_FromUnsignedLong(cr_eval_masks(m[0], m[1], m[2], m[3]));
}

/* ------------------------------------------------------------ category counts */

typedef struct {
    int n;
    int *next; /* guarded by mu */
    pthread_mutex_t *mu;
    uint64_t cnt[9];
} cc_arg;

static void cc_rec(int left, int below, const uint32_t *m, uint64_t *cnt)
{
    if (left == 1) {
        for (int c = 0; c < below; c++) {
            uint32_t mm[4] = {m[0], m[1], m[2], m[3]};
            mm[c & 3] |= 1u << (c >> 2);
            cnt[cr_eval_masks(mm[0], mm[1], mm[2], mm[3]) >> 20]++;
        }
        return;
    }
    for (int c = left - 1; c < below; c++) {
        uint32_t mm[4] = {m[0], m[1], m[2], m[3]};
        mm[c & 3] |= 1u << (c >> 2);
        cc_rec(left - 1, c, mm, cnt);
    }
}

static void *cc_worker(void *p)
{
    cc_arg *a = p;
    for (;;) {
        pthread_mutex_lock(a->mu);
        int top = (*a->next)--;
        pthread_mutex_unlock(a->mu);
        if (top < a->n - 1)
            break;
        uint32_t m[4] = {0, 0, 0, 0};
        m[top & 3] |= 1u << (top >> 2);
        cc_rec(a->n - 1, top, m, a->cnt);
    }
    return NULL;
}

static PyObject *py_category_counts(PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 5 || n > 7) {
        PyErr_Format(PyExc_ValueError, "category_counts needs n in 5..7, got %ld", n);
        return NULL;
    }
    int next = 51;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    cc_arg a[2];
    memset(a, 0, sizeof a);
    a[0].n = a[1].n = (int)n;
    a[0].next = a[1].next = &next;
    a[0].mu = a[1].mu = &mu;
    Py_BEGIN_ALLOW_THREADS
    pthread_t tid;
    int started = pthread_create(&tid, NULL, cc_worker, &a[1]) == 0;
    cc_worker(&a[0]);
    if (started)
        pthread_join(tid, NULL);
    Py_END_ALLOW_THREADS
    PyObject *res = PyList_New(9);
    if (!res)
        return NULL;
    for (int i = 0; i < 9; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(a[0].cnt[i] + a[1].cnt[i]);
        if (!v) {
            Py_DECREF(res);
            return NULL;
        }
        PyList_SET_ITEM(res, i, v);
    }
    return res;
}

/* ------------------------------------------------------------ Hold'em */

static PyObject *u64_list(const uint64_t *v, int n)
{
    PyObject *l = PyList_New(n);
    if (!l)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* Adds "nq", "win", "tie", "lose" from a CR_NCNT counter array to d. */
static int put_counters(PyObject *d, const uint64_t *cnt)
{
    PyObject *nq = u64_list(cnt + CR_NQ, 6), *win = u64_list(cnt + CR_WIN, 6);
    PyObject *tie = PyLong_FromUnsignedLongLong(cnt[CR_TIE]);
    PyObject *lose = PyLong_FromUnsignedLongLong(cnt[CR_LOSE]);
    int rc = -1;
    if (nq && win && tie && lose && PyDict_SetItemString(d, "nq", nq) == 0 &&
        PyDict_SetItemString(d, "win", win) == 0 && PyDict_SetItemString(d, "tie", tie) == 0 &&
        PyDict_SetItemString(d, "lose", lose) == 0)
        rc = 0;
    Py_XDECREF(nq);
    Py_XDECREF(win);
    Py_XDECREF(tie);
    Py_XDECREF(lose);
    return rc;
}

static int put_u64(PyObject *d, const char *key, uint64_t v)
{
    PyObject *x = PyLong_FromUnsignedLongLong(v);
    if (!x)
        return -1;
    int rc = PyDict_SetItemString(d, key, x);
    Py_DECREF(x);
    return rc;
}

static PyObject *aa_dict(const uint64_t *aa)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (put_u64(d, "flush_or_better", aa[0]) < 0 || put_u64(d, "aces_to_straight", aa[1]) < 0 ||
        put_u64(d, "lost", aa[2]) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* One int parameter: TypeError unless an int (bool excluded), ValueError outside lo..hi. */
static int parse_param_int(PyObject *o, long lo, long hi, const char *fn, const char *what,
                           int64_t *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be an int, got %.100s", fn, what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be in %ld..%ld, got %R", fn, what, lo, hi, o);
        return -1;
    }
    *out = v;
    return 0;
}

/* A sequence of exactly n pays, each 0..CR_MAX_PAY. */
static int parse_pays(PyObject *o, int n, const char *fn, const char *name, const char *layout,
                      int64_t *out)
{
    if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of %d ints (%s), got %.100s", fn,
                     name, n, layout, Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *seq = PySequence_Fast(o, "pays must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len != n) {
        PyErr_Format(PyExc_ValueError, "%s: %s needs exactly %d pays (%s), got %zd", fn, name, n,
                     layout, len);
        Py_DECREF(seq);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s[%d]", name, i);
        if (parse_param_int(PySequence_Fast_GET_ITEM(seq, i), 0, CR_MAX_PAY, fn, what,
                            out + i) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* The table keyword arguments (NULL = default) into p. */
static int parse_holdem_params(PyObject *ante, PyObject *aa, PyObject *qual, PyObject *mult,
                               const char *fn, cr_holdem_params *p)
{
    const cr_holdem_params def = CR_HOLDEM_DEFAULT_PARAMS;
    *p = def;
    int64_t v;
    if (ante && parse_pays(ante, 6, fn, "ante_pays",
                           "straight or less, flush, full house, four of a kind, straight flush, "
                           "royal flush",
                           p->ante_pay) < 0)
        return -1;
    if (aa && parse_pays(aa, 2, fn, "aa_pays", "flush or better, pair of aces to straight",
                         p->aa_pay) < 0)
        return -1;
    if (qual) {
        if (parse_param_int(qual, 0, 12, fn, "qualify_pair_rank (0 = 2s .. 12 = As)", &v) < 0)
            return -1;
        p->qualify_rank = (int)v;
    }
    if (mult && parse_param_int(mult, 1, CR_MAX_CALL_MULTIPLE, fn, "call_multiple",
                                &p->call_multiple) < 0)
        return -1;
    return 0;
}

static PyObject *called_dict(const int called[2])
{
    return Py_BuildValue("{s:O,s:O}", "ante_only", called[0] ? Py_True : Py_False,
                         "with_aa_bonus", called[1] ? Py_True : Py_False);
}

static PyObject *py_holdem_situation(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ante_pays", "aa_pays", "qualify_pair_rank", "call_multiple", NULL};
    PyObject *ante = NULL, *aa = NULL, *qual = NULL, *mult = NULL;
    PyObject *none = PyTuple_New(0);
    if (!none)
        return NULL;
    int ok = PyArg_ParseTupleAndKeywords(none, kwargs, "|$OOOO:holdem_situation", kwlist, &ante,
                                         &aa, &qual, &mult);
    Py_DECREF(none);
    if (!ok)
        return NULL;
    cr_holdem_params prm;
    if (parse_holdem_params(ante, aa, qual, mult, "holdem_situation", &prm) < 0)
        return NULL;
    int c[5];
    if (parse_cards(args, 5, 5, c, "holdem_situation(p0, p1, f0, f1, f2)") < 0)
        return NULL;
    uint64_t cnt[CR_NCNT];
    int aa_out;
    Py_BEGIN_ALLOW_THREADS
    cr_holdem_situation(c, &prm, cnt, &aa_out);
    Py_END_ALLOW_THREADS
    int called[2];
    cr_decide(&prm, cnt, CR_CONT_PER_SITUATION, aa_out, called);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *net = NULL, *cd = NULL;
    if (put_counters(d, cnt) < 0 || !(net = PyLong_FromLongLong(cr_call_net(&prm, cnt))) ||
        PyDict_SetItemString(d, "call_net", net) < 0 || !(cd = called_dict(called)) ||
        PyDict_SetItemString(d, "called", cd) < 0) {
        Py_XDECREF(net);
        Py_XDECREF(cd);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(net);
    Py_DECREF(cd);
    return d;
}

static PyObject *strategy_dict(const cr_strategy *s)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *aa = NULL;
    if (put_u64(d, "situations_called", s->situations_called) < 0 ||
        put_u64(d, "situations_folded", s->situations_folded) < 0 ||
        put_u64(d, "classes_called", s->classes_called) < 0 ||
        put_u64(d, "classes_folded", s->classes_folded) < 0 ||
        put_u64(d, "fold", s->fold_deals) < 0 || put_counters(d, s->cnt) < 0 ||
        !(aa = aa_dict(s->aa)) || PyDict_SetItemString(d, "aa", aa) < 0) {
        Py_XDECREF(aa);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(aa);
    return d;
}

static PyObject *py_holdem_analysis(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"threads",           "situations",    "ante_pays", "aa_pays",
                             "qualify_pair_rank", "call_multiple", NULL};
    int threads = 2;
    PyObject *sit_obj = Py_None, *ante = NULL, *aa = NULL, *qual = NULL, *mult = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|iO$OOOO:holdem_analysis", kwlist, &threads,
                                     &sit_obj, &ante, &aa, &qual, &mult))
        return NULL;
    if (threads < 1 || threads > 64) {
        PyErr_Format(PyExc_ValueError, "threads must be in 1..64, got %d", threads);
        return NULL;
    }
    cr_holdem_params prm;
    if (parse_holdem_params(ante, aa, qual, mult, "holdem_analysis", &prm) < 0)
        return NULL;
    PyObject *sitseq = NULL;
    int nsit = 0;
    int *sits = NULL;
    cr_sit_result *sres = NULL;
    if (sit_obj != Py_None) {
        sitseq = PySequence_Fast(sit_obj, "situations must be a sequence of (p0, p1, f0, f1, f2)");
        if (!sitseq)
            return NULL;
        Py_ssize_t ns = PySequence_Fast_GET_SIZE(sitseq);
        if (ns > 1000000) {
            PyErr_SetString(PyExc_ValueError, "too many situations (max 1000000)");
            Py_DECREF(sitseq);
            return NULL;
        }
        nsit = (int)ns;
        sits = PyMem_Malloc(sizeof(int) * 5 * (nsit + 1));
        sres = PyMem_Malloc(sizeof(cr_sit_result) * (nsit + 1));
        if (!sits || !sres) {
            PyErr_NoMemory();
            goto fail;
        }
        for (int i = 0; i < nsit; i++)
            if (parse_cards(PySequence_Fast_GET_ITEM(sitseq, i), 5, 5, sits + 5 * i,
                            "a situation (p0, p1, f0, f1, f2)") < 0)
                goto fail;
    }
    cr_holdem_result res;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cr_holdem_analysis(threads, &prm, nsit, sits, &res, sres);
    Py_END_ALLOW_THREADS
    if (rc == -1) {
        PyErr_NoMemory();
        goto fail;
    }
    if (rc == -2) {
        PyErr_SetString(PyExc_RuntimeError, "holdem_analysis: could not start threads");
        goto fail;
    }
    if (rc != 0) {
        PyErr_SetString(PyExc_RuntimeError, "holdem_analysis: internal consistency check failed");
        goto fail;
    }
    PyObject *d = PyDict_New(), *x = NULL;
    if (!d)
        goto fail;
    if (put_u64(d, "deals_total", res.deals_total) < 0 ||
        put_u64(d, "situations_total", res.situations_total) < 0 ||
        put_u64(d, "classes", res.classes) < 0 ||
        put_u64(d, "boards_canonical", res.boards_canonical) < 0)
        goto fail_d;
    if (!(x = strategy_dict(&res.strat[0])) || PyDict_SetItemString(d, "ante_only", x) < 0)
        goto fail_d;
    Py_CLEAR(x);
    if (!(x = strategy_dict(&res.strat[1])) || PyDict_SetItemString(d, "with_aa_bonus", x) < 0)
        goto fail_d;
    Py_CLEAR(x);
    if (!(x = aa_dict(res.aa5)) || put_u64(x, "total", res.aa5[0] + res.aa5[1] + res.aa5[2]) < 0 ||
        PyDict_SetItemString(d, "aa_bonus_five_card", x) < 0)
        goto fail_d;
    Py_CLEAR(x);
    if (sitseq) {
        PyObject *lst = PyList_New(nsit);
        if (!lst || PyDict_SetItemString(d, "situations", lst) < 0) {
            Py_XDECREF(lst);
            goto fail_d;
        }
        Py_DECREF(lst); /* d holds it */
        for (int i = 0; i < nsit; i++) {
            const cr_sit_result *s = &sres[i];
            const int *c = sits + 5 * i;
            PyObject *e = PyDict_New();
            if (!e)
                goto fail_d;
            PyList_SET_ITEM(lst, i, e);
            PyObject *cards = Py_BuildValue("(iiiii)", c[0], c[1], c[2], c[3], c[4]);
            PyObject *called = called_dict(s->called);
            int bad = !cards || !called || PyDict_SetItemString(e, "cards", cards) < 0 ||
                      put_u64(e, "class_id", s->class_id) < 0 ||
                      put_u64(e, "class_size", s->class_size) < 0 || put_counters(e, s->cnt) < 0 ||
                      PyDict_SetItemString(e, "called", called) < 0;
            Py_XDECREF(cards);
            Py_XDECREF(called);
            if (bad)
                goto fail_d;
        }
    }
    Py_XDECREF(sitseq);
    PyMem_Free(sits);
    PyMem_Free(sres);
    return d;
fail_d:
    Py_XDECREF(x);
    Py_DECREF(d);
fail:
    Py_XDECREF(sitseq);
    PyMem_Free(sits);
    PyMem_Free(sres);
    return NULL;
}

/* ------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"rank", py_rank, METH_O, "rank(cards) -> int: value of one hand of 5..7 card codes."},
    {"rank_batch", (PyCFunction)(void (*)(void))py_rank_batch, METH_VARARGS | METH_KEYWORDS,
     "rank_batch(cards, n_per_hand, out, threads=2): rank len(cards)//n_per_hand hands of uint8 "
     "card codes into the uint32 buffer out."},
    {"category_counts", py_category_counts, METH_O,
     "category_counts(n) -> list of 9 category counts over all C(52, n) hands (n in 5..7)."},
    {"holdem_situation", (PyCFunction)(void (*)(void))py_holdem_situation,
     METH_VARARGS | METH_KEYWORDS,
     "holdem_situation(p0, p1, f0, f1, f2, *, ante_pays=(1, 2, 3, 10, 20, 100), aa_pays=(25, 7), "
     "qualify_pair_rank=2, call_multiple=2) -> brute-force outcome counters, call net and "
     "decision of one Casino Hold'em situation."},
    {"holdem_analysis", (PyCFunction)(void (*)(void))py_holdem_analysis,
     METH_VARARGS | METH_KEYWORDS,
     "holdem_analysis(threads=2, situations=None, *, ante_pays=(1, 2, 3, 10, 20, 100), "
     "aa_pays=(25, 7), qualify_pair_rank=2, call_multiple=2) -> dict of exact Casino Hold'em "
     "counters under the best call/fold play for that table."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_native",
                                 "Native kernels of croupier_rules: hand ranking and the exact "
                                 "Casino Hold'em analysis.",
                                 -1, methods};

PyMODINIT_FUNC PyInit__native(void)
{
    cr_init_tables();
    return PyModule_Create(&mod);
}
