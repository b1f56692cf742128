/*
 * Pieces of the configuration reader shared between its files (not public).
 *
 * lexer.c splits one line into arguments; value.c checks and stores one
 * typed value; config.c drives both over a whole file (blocks, duplicates,
 * recovery) and holds the public entry points of config.h.
 */
#ifndef SG_CONFIG_INTERNAL_H
#define SG_CONFIG_INTERNAL_H

#include "config/config.h"

/* Reusable storage for the arguments of one line; zero it before first use. */
struct sg_conf__lexer {
    char *buf; /* unescaped argument texts, NUL-separated */
    size_t bufcap;
    struct sg_conf_arg *args;
    int nargs, argcap;
};

/*
 * Splits the line `text` (`len` bytes, without its newline; a trailing CR is
 * whitespace) into lx->args, dropping comments.  Returns the number of
 * arguments, SG_E_CONFIG after reporting a lexical error (lx->args then
 * holds the arguments before the error), or -ENOMEM (nothing reported).
 * The arguments are valid until the next call or sg_conf__lexer_finish().
 */
int sg_conf__lex_line(struct sg_conf__lexer *lx, const char *text, size_t len, int line,
                      const char *file, struct sg_conf_diag *diag);
/* Frees what the lexer holds; a zeroed lexer is fine. */
void sg_conf__lexer_finish(struct sg_conf__lexer *lx);

/*
 * Checks `arg` against the type and bounds of `d` and stores it into `obj`
 * at d->offset; with `obj` NULL only checks.  Not for CUSTOM or BLOCK.
 * Returns 0, SG_E_CONFIG after reporting a bad value, or -ENOMEM after
 * reporting "out of memory".  `arg` is borrowed for the call.
 */
int sg_conf__set_value(const struct sg_conf_directive *d, void *obj, const struct sg_conf_arg *arg,
                       const char *file, struct sg_conf_diag *diag);

/* Copies `s` into `out` (`cap` bytes) for a message: clipped, controls as '?'. */
const char *sg_conf__clip(const char *s, char *out, size_t cap);

#endif
