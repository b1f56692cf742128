/*
 * Signed recordings: keys, the `.sig` sidecar writer and its reader.
 *
 * A recording FILE (a demo, a capture) gets FILE.sig, a line-oriented text
 * file (doc/signatures.md has the format): a header naming the key and the
 * recording's metadata, then one checkpoint line per N seconds and one at
 * the end.  Each checkpoint holds the BLAKE2b-256 hash of FILE's first B
 * bytes and an Ed25519 signature over that hash, B, the checkpoint's number
 * and time, and the hash of the header.  Lines are appended with one
 * write(2) each, so a recording cut by kill -9 verifies up to its last
 * checkpoint.
 *
 * The writer hashes as bytes are written: the FILE * it hands out forwards
 * every write to the recording's descriptor and feeds the bytes that went
 * out to the hash (fopencookie).  Signing happens only at checkpoints.
 *
 * Not game-specific: the record and pcap filters write with it, `slipgate
 * keygen` and `slipgate demo verify` use the rest.  Needs libsodium.
 */
#ifndef SG_FILTERS_SIGN_H
#define SG_FILTERS_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SG_SIGN_VERSION    1
#define SG_SIGN_ID_LEN     16 /* hex characters of a key id */
#define SG_SIGN_PK_BYTES   32
#define SG_SIGN_SK_BYTES   64
#define SG_SIGN_DEFAULT_INTERVAL_MS 10000

/* A signing key pair (secret key held in memory for the process's life). */
struct sg_sign_key {
    uint8_t sk[SG_SIGN_SK_BYTES];
    uint8_t pk[SG_SIGN_PK_BYTES];
    char id[SG_SIGN_ID_LEN + 1];
};

/* A fresh key pair.  0 or a negative error (libsodium failed to start). */
int sg_sign_keygen(struct sg_sign_key *key);

/*
 * Write PREFIX (the secret key, created 0600, never over an existing file)
 * and PREFIX.pub (the public key line).  0, or a negative errno with a
 * sentence in `why`.
 */
int sg_sign_key_save(const struct sg_sign_key *key, const char *prefix, char *why, size_t whylen);

/*
 * Read a secret key file made by sg_sign_key_save.  Refused (SG_E_CONFIG,
 * sentence in `why`) when the file is readable or writable by group or
 * others, or malformed; a negative errno when it cannot be read.
 */
int sg_sign_key_load(const char *path, struct sg_sign_key *key, char *why, size_t whylen);

/* Wipe a key from memory.  NULL ok. */
void sg_sign_key_wipe(struct sg_sign_key *key);

/* The key id of a public key: 16 hex characters of its BLAKE2b hash. */
void sg_sign_key_id(const uint8_t pk[SG_SIGN_PK_BYTES], char id[SG_SIGN_ID_LEN + 1]);

/* The public key line "slipgate-pub 1 ID BASE64" (no newline) into out (>= 100 bytes). */
void sg_sign_pub_line(const uint8_t pk[SG_SIGN_PK_BYTES], char *out, size_t cap);

/*
 * A public key from text: 64 hex characters, its base64 (44), or a
 * "slipgate-pub 1 ID BASE64" line.  0 or -EINVAL.
 */
int sg_sign_pub_parse(const char *text, uint8_t pk[SG_SIGN_PK_BYTES]);

/*
 * A public key from a file: a .pub file, or a secret key file (its public
 * half).  0 or a negative error with a sentence in `why`.
 */
int sg_sign_pub_load(const char *path, uint8_t pk[SG_SIGN_PK_BYTES], char *why, size_t whylen);

/* ---- the writer ---- */

struct sg_sign_writer;

/* The metadata of one recording; every string may be NULL (not written). */
struct sg_sign_meta {
    const char *route, *server, *client, *map, *protocol, *kind; /* kind: "demo", "pcap" */
    uint64_t start_ms; /* wall clock, ms since the epoch */
};

/*
 * Create `path`.sig (never over an existing file) for the recording at
 * `path`, whose descriptor `fd` the writer takes over, and return in *fp a
 * stream to write the recording through (closing it closes `fd`; close it
 * only after sg_sign_writer_finish).  `key` is borrowed until
 * sg_sign_writer_destroy.  0 or a negative error; on error `fd` is closed.
 */
int sg_sign_writer_create(struct sg_sign_writer **out, const struct sg_sign_key *key,
                          const char *path, int fd, const struct sg_sign_meta *meta,
                          int64_t interval_ms, FILE **fp);

/*
 * After a write (and an fflush of the stream): make a checkpoint when
 * `interval_ms` has passed since the last one.  `now_ms` is a monotonic
 * clock; `items` the messages (packets) written so far.  Returns 1 when a
 * checkpoint was written, 0 when none was due, or a negative error.
 */
int sg_sign_writer_tick(struct sg_sign_writer *w, uint64_t now_ms, uint64_t items);

/*
 * After a whole item (message) was written and the stream flushed: the
 * recording may be cut back to here.
 */
void sg_sign_writer_mark(struct sg_sign_writer *w);

/*
 * A write failed part-way (a full disk): cut the recording back to the last
 * mark (the file truncated, the hash as it was there), so that the file
 * and its checkpoints end on a whole item.  The caller discards the
 * stream's buffer first (__fpurge).  0 or a negative error.
 */
int sg_sign_writer_cut(struct sg_sign_writer *w);

/* The final checkpoint (after the recording's last byte was flushed).  0 or a negative error. */
int sg_sign_writer_finish(struct sg_sign_writer *w, uint64_t items);

/* Free the writer (after its stream was closed); `remove_sig` deletes the .sig too.  NULL ok. */
void sg_sign_writer_destroy(struct sg_sign_writer *w, bool remove_sig);

/* ---- the reader ---- */

enum sg_sign_verdict {
    SG_SIGN_WHOLE,     /* authentic, whole */
    SG_SIGN_PARTIAL,   /* authentic up to the last checkpoint (the recording was cut) */
    SG_SIGN_MODIFIED,  /* modified at or after byte `bytes` */
    SG_SIGN_OTHER_KEY, /* signed by another key (`key_id`) */
    SG_SIGN_NONE,      /* no (readable) signature */
};

struct sg_sign_result {
    enum sg_sign_verdict verdict;
    uint64_t bytes;        /* WHOLE/PARTIAL: bytes signed; MODIFIED: where it starts */
    uint64_t items;        /* messages/packets the last good checkpoint covers */
    uint64_t file_bytes;   /* the recording's length */
    uint64_t cut_ms;       /* PARTIAL: wall-clock time of the last checkpoint */
    unsigned checkpoints;  /* good checkpoints */
    bool sig_truncated;    /* the .sig ended in a partial line (ignored) */
    char key_id[SG_SIGN_ID_LEN + 1]; /* the key the .sig names, "" if none */
    char file[128];        /* the file name the .sig was made for */
    char map[64], route[64], client[64], kind[16];
    uint64_t start_ms;
    char reason[200];      /* why, for MODIFIED/NONE/OTHER_KEY and extra notes */
};

/*
 * Check `data` (the recording, `len` bytes) against its .sig text `sig`
 * (`siglen` bytes; NULL means there is none).  `pk` is the trusted public
 * key, or NULL to use the key the .sig names (the result then says so).
 * Never fails: every damage is a verdict in *res.
 */
void sg_sign_verify_mem(const uint8_t *sig, size_t siglen, const uint8_t *data, size_t len,
                        const uint8_t *pk, struct sg_sign_result *res);

/* The one-line, human- and script-readable verdict ("authentic, whole", ...). */
void sg_sign_result_line(const struct sg_sign_result *res, char *out, size_t cap);

/* The verdict's word for --json: "whole", "partial", "modified", "other_key", "none". */
const char *sg_sign_verdict_name(enum sg_sign_verdict v);

#endif
