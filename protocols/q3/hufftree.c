/*
 * Quake 3 Huffman coding: the adaptive tree both coders rest on, and the
 * adaptive coder of the `connect` packet (huffman.h); the fixed coder
 * built from the tree is huffman.c's.
 *
 * The adaptive tree
 * -----------------
 * Both coders rest on one adaptive Huffman tree in the style of Sayood's
 * "Data Compression" (the FGK family).  The tree starts as a single leaf,
 * NYT ("not yet transmitted", symbol 256, weight 0).  Every node also sits
 * in one rank list that runs from NYT (lowest) upwards; a node's rank is
 * only its place in that list.  Nodes of equal weight that are next to each
 * other form a block, and every block has a slot naming its leader, the
 * member ranked highest.  Members of a block share the slot.
 *
 * Adding a symbol that is already in the tree increments its leaf; adding a
 * new one splits NYT into an internal node (weight 1, left child NYT) whose
 * right child is the new leaf (weight 1), both ranked just above NYT, and
 * then increments the old parent of NYT.  Incrementing a node walks up to
 * the root; at each node it
 *   1. exchanges the node with its block leader, in the tree (unless the
 *      leader is the node's own parent) and in the rank list, when a node of
 *      equal weight ranks directly above it;
 *   2. leaves its block (the node below becomes leader, or the slot is freed
 *      when the node was alone), adds 1 to its weight, then joins the block
 *      directly above when that has the new weight or opens a new slot;
 *   3. moves to its (possibly new) parent.
 * When the walk comes back down, a node that ranks directly above its own
 * parent exchanges ranks with it, and hands its leader slot to the parent
 * when it was the leader.
 *
 * Bit-exact output depends on the game's tie-breaking, so the details are
 * kept even where they look accidental: the tree exchange rewires the first
 * node's parent, then the second's, one child pointer each (for two
 * siblings this exchanges them only when the first is the right child);
 * leader slots come from a pool with a last-in first-out free list.  The
 * result is checked against real traffic: demos decode, and real connect
 * packets recompress to the captured bytes.
 * A bit is 1 for a right child and 0 for a left one; a code is sent from the
 * root down, each bit at the next position LSB first.
 *
 * The adaptive coder
 * ------------------
 * The connect packet's body is a 16-bit big-endian length, then per byte
 * either the byte's current code, or NYT's code followed by the byte's
 * 8 bits MSB first when the byte is new; the tree is updated after every
 * byte, identically on both sides.
 */
#include "protocols/q3/huffman.h"
#include "protocols/q3/hufftree.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "protocols/error.h"

/* ------------------------------------------------------------------ */
/* The adaptive tree                                                    */

void sg_q3__atree_init(struct atree *t)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; i <= NYT; i++)
        t->leaf[i] = NONE;
    t->n[0] = (struct anode){.weight = 0,
                             .parent = NONE,
                             .left = NONE,
                             .right = NONE,
                             .up = NONE,
                             .down = NONE,
                             .slot = NONE,
                             .sym = NYT};
    t->leaf[NYT] = 0;
    t->root = 0;
    t->nodes = 1;
    t->free_slot = NONE;
}

static int slot_take(struct atree *t)
{
    int s = t->free_slot;

    if (s != NONE) {
        t->free_slot = t->slot_next[s];
        return s;
    }
    /* Live slots never outnumber nodes, so the pool cannot run out. */
    return t->slots++;
}

static void slot_release(struct atree *t, int s)
{
    t->slot[s] = FREED;
    t->slot_next[s] = (int16_t)t->free_slot;
    t->free_slot = s;
}

static inline int32_t weight_of(const struct atree *t, int i)
{
    return t->n[i].weight;
}

/* Exchange the places of subtrees `a` and `b` (see the file comment). */
static void tree_exchange(struct atree *t, int a, int b)
{
    int pa = t->n[a].parent, pb = t->n[b].parent;

    if (pa == NONE)
        t->root = b;
    else if (t->n[pa].left == a)
        t->n[pa].left = (int16_t)b;
    else
        t->n[pa].right = (int16_t)b;

    if (pb == NONE)
        t->root = a;
    else if (t->n[pb].left == b)
        t->n[pb].left = (int16_t)a;
    else
        t->n[pb].right = (int16_t)a;

    t->n[a].parent = (int16_t)pb;
    t->n[b].parent = (int16_t)pa;
}

/* Exchange the ranks of `a` and `b`. */
static void rank_exchange(struct atree *t, int a, int b)
{
    struct anode *na, *nb;
    int16_t tmp;

    if (a == b)
        return;
    if (t->n[b].up == a) { /* make `a` the lower one of an adjacent pair */
        int c = a;
        a = b;
        b = c;
    }
    na = &t->n[a];
    nb = &t->n[b];
    if (na->up == b) {
        int below = na->down, above = nb->up;

        nb->down = (int16_t)below;
        nb->up = (int16_t)a;
        na->down = (int16_t)b;
        na->up = (int16_t)above;
        if (below != NONE)
            t->n[below].up = (int16_t)b;
        if (above != NONE)
            t->n[above].down = (int16_t)a;
        return;
    }
    tmp = na->up;
    na->up = nb->up;
    nb->up = tmp;
    tmp = na->down;
    na->down = nb->down;
    nb->down = tmp;
    if (na->up != NONE)
        t->n[na->up].down = (int16_t)a;
    if (na->down != NONE)
        t->n[na->down].up = (int16_t)a;
    if (nb->up != NONE)
        t->n[nb->up].down = (int16_t)b;
    if (nb->down != NONE)
        t->n[nb->down].up = (int16_t)b;
}

/* Add 1 to the weight of node `i` and of all its ancestors. */
static void atree_increment(struct atree *t, int i)
{
    int16_t path[NODES];
    int depth = 0;

    /* On the way up: reach the top of the block, change block, climb. */
    while (i != NONE) {
        struct anode *x = &t->n[i];

        if (x->up != NONE && weight_of(t, x->up) == x->weight) {
            int leader = t->slot[x->slot];

            if (leader >= 0) {
                if (leader != x->parent)
                    tree_exchange(t, leader, i);
                rank_exchange(t, leader, i);
            }
        }
        if (x->down != NONE && weight_of(t, x->down) == x->weight)
            t->slot[x->slot] = x->down;
        else
            slot_release(t, x->slot);
        x->weight++;
        if (x->up != NONE && weight_of(t, x->up) == x->weight) {
            x->slot = t->n[x->up].slot;
        } else {
            x->slot = (int16_t)slot_take(t);
            t->slot[x->slot] = (int16_t)i;
        }
        path[depth++] = (int16_t)i;
        i = x->parent;
    }

    /* On the way down: a node ranked just above its parent trades ranks. */
    while (depth > 0) {
        struct anode *x;

        i = path[--depth];
        x = &t->n[i];
        if (x->parent != NONE && x->down == x->parent) {
            rank_exchange(t, i, x->parent);
            if (t->slot[x->slot] == i)
                t->slot[x->slot] = x->parent;
        }
    }
}

/* Count one more occurrence of byte `ch`. */
void sg_q3__atree_add(struct atree *t, int ch)
{
    int nyt = t->leaf[NYT], parent, inner, leaf, above;

    if (t->leaf[ch] != NONE) {
        atree_increment(t, t->leaf[ch]);
        return;
    }

    leaf = t->nodes++;
    inner = t->nodes++;
    parent = t->n[nyt].parent;

    /* The new internal node ranks just above NYT... */
    above = t->n[nyt].up;
    t->n[inner] = (struct anode){.weight = 1,
                                 .parent = (int16_t)parent,
                                 .left = (int16_t)nyt,
                                 .right = (int16_t)leaf,
                                 .up = (int16_t)above,
                                 .down = (int16_t)nyt,
                                 .sym = INTERNAL};
    if (above != NONE && weight_of(t, above) == 1) {
        t->n[inner].slot = t->n[above].slot;
    } else {
        t->n[inner].slot = (int16_t)slot_take(t);
        t->slot[t->n[inner].slot] = (int16_t)inner;
    }
    if (above != NONE)
        t->n[above].down = (int16_t)inner;

    /* ...and the new leaf between the two, in the internal node's block. */
    t->n[leaf] = (struct anode){.weight = 1,
                                .parent = (int16_t)inner,
                                .left = NONE,
                                .right = NONE,
                                .up = (int16_t)inner,
                                .down = (int16_t)nyt,
                                .slot = t->n[inner].slot,
                                .sym = (int16_t)ch};
    t->n[inner].down = (int16_t)leaf;
    t->n[nyt].up = (int16_t)leaf;

    /* The internal node takes NYT's place in the tree. */
    if (parent == NONE)
        t->root = inner;
    else if (t->n[parent].left == nyt)
        t->n[parent].left = (int16_t)inner;
    else
        t->n[parent].right = (int16_t)inner;
    t->n[nyt].parent = (int16_t)inner;
    t->leaf[ch] = (int16_t)leaf;

    if (parent != NONE)
        atree_increment(t, parent);
}

/* The code of leaf `i`, root first, as bits[0..len); returns len. */
int sg_q3__atree_path(const struct atree *t, int i, uint8_t *bits)
{
    int len = 0;

    while (t->n[i].parent != NONE) {
        int p = t->n[i].parent;

        bits[len++] = t->n[p].right == i;
        i = p;
    }
    for (int k = 0; k < len / 2; k++) {
        uint8_t b = bits[k];

        bits[k] = bits[len - 1 - k];
        bits[len - 1 - k] = b;
    }
    return len;
}

/* ------------------------------------------------------------------ */
/* Adaptive coder                                                       */

static inline int get_bit(const uint8_t *in, size_t len, size_t *pos)
{
    size_t p = (*pos)++;

    return (p >> 3) < len ? (in[p >> 3] >> (p & 7)) & 1 : 0;
}

static inline bool put_bit(uint8_t *out, size_t cap, size_t *pos, int b)
{
    size_t p = *pos;

    if ((p >> 3) >= cap)
        return false;
    if (!(p & 7))
        out[p >> 3] = 0;
    out[p >> 3] |= (uint8_t)(b << (p & 7));
    *pos = p + 1;
    return true;
}

int sg_q3_huff_adaptive_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap)
{
    struct atree t;
    size_t want, pos = 16;

    if (in_len == 0)
        return 0;
    if (in_len < 2)
        return SG_E_TRUNCATED;
    want = (size_t)in[0] << 8 | in[1];
    if (want > cap)
        want = cap;

    sg_q3__atree_init(&t);
    for (size_t j = 0; j < want; j++) {
        int node = t.root, ch;

        /* The game stops once a symbol would start past the end. */
        if ((pos >> 3) > in_len) {
            memset(out + j, 0, want - j);
            break;
        }
        while (node != NONE && t.n[node].sym == INTERNAL)
            node = get_bit(in, in_len, &pos) ? t.n[node].right : t.n[node].left;
        ch = node == NONE ? 0 : t.n[node].sym;
        if (ch == NYT) {
            ch = 0;
            for (int k = 0; k < 8; k++)
                ch = ch << 1 | get_bit(in, in_len, &pos);
        }
        out[j] = (uint8_t)ch;
        sg_q3__atree_add(&t, ch);
    }
    return (int)want;
}

int sg_q3_huff_adaptive_compress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap)
{
    struct atree t;
    uint8_t path[NODES];
    size_t pos = 16;

    if (in_len == 0)
        return 0;
    if (in_len > 0xffff)
        return SG_E_TOOBIG;
    if (cap < 2)
        return SG_E_OVERFLOW;
    out[0] = (uint8_t)(in_len >> 8);
    out[1] = (uint8_t)in_len;

    sg_q3__atree_init(&t);
    for (size_t i = 0; i < in_len; i++) {
        int ch = in[i], fresh = t.leaf[ch] == NONE;
        int len = sg_q3__atree_path(&t, fresh ? t.leaf[NYT] : t.leaf[ch], path);

        for (int k = 0; k < len; k++)
            if (!put_bit(out, cap, &pos, path[k]))
                return SG_E_OVERFLOW;
        for (int k = 7; fresh && k >= 0; k--)
            if (!put_bit(out, cap, &pos, (ch >> k) & 1))
                return SG_E_OVERFLOW;
        sg_q3__atree_add(&t, ch);
    }

    /* The game counts one byte past the last bit written. */
    if ((pos >> 3) >= cap)
        return SG_E_OVERFLOW;
    if (!(pos & 7))
        out[pos >> 3] = 0;
    return (int)(pos >> 3) + 1;
}
