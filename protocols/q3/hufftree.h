/*
 * The adaptive Huffman tree both Quake 3 coders rest on, shared by
 * huffman.c (the fixed coder, built from it once) and hufftree.c (the
 * tree, and the adaptive coder of the `connect` packet) and no one else.
 */
#ifndef SG_PROTOCOLS_Q3_HUFFTREE_H
#define SG_PROTOCOLS_Q3_HUFFTREE_H

#include <stdint.h>

#define NYT      256  /* the escape leaf's symbol */
#define INTERNAL 257  /* symbol of an internal node */
#define NODES    513  /* NYT + one leaf and one internal node per byte value */
#define SLOTS    768  /* leader-slot pool, as large as the game's */
#define NONE     (-1) /* no node */
#define FREED    (-2) /* the value of a slot on the free list */

struct anode {
    int32_t weight;
    int16_t parent, left, right; /* tree */
    int16_t up, down;            /* rank list: next higher, next lower */
    int16_t slot;                /* leader slot of this node's block */
    int16_t sym;                 /* 0..255, NYT or INTERNAL */
};

struct atree {
    struct anode n[NODES];
    int16_t leaf[NYT + 1]; /* symbol -> leaf, NONE if not yet in the tree */
    int16_t slot[SLOTS];   /* leader of each block, FREED when on the free list */
    int16_t slot_next[SLOTS];
    int root, nodes, slots, free_slot;
};

/* An empty tree: NYT alone. */
void sg_q3__atree_init(struct atree *t);
/* Count one more occurrence of byte `ch`. */
void sg_q3__atree_add(struct atree *t, int ch);
/* The code of leaf `i`, root first, as bits[0..len); returns len. */
int sg_q3__atree_path(const struct atree *t, int i, uint8_t *bits);

#endif
