/*
 * Quake 3 demo files (.dm_66, .dm_67, .dm_68, .dm_71) and recording.
 *
 * Container, all integers little-endian:
 *
 *     { int32 sequence; int32 length; length bytes } ...   server messages
 *     int32 -1; int32 -1                                   end marker
 *
 * Each message is the server message as the client received it (netchan
 * header removed, protocol 68 XOR already undone), still Huffman coded;
 * `sequence` is its netchan sequence, which snapshots use to find their
 * delta base.  The game stops at length -1 (whatever the sequence), and
 * refuses a length over MAX_MSGLEN.  A file that ends without the marker
 * (a crash or a copy in progress) is read up to its last whole message
 * and reported as truncated.
 *
 * A recording that starts mid-stream (a proxy that joins late, or `demo
 * cut`) first writes a gamestate built from the tracked configstrings and
 * baselines, then the first snapshot re-encoded without delta; later
 * snapshots whose base frame is not in the file are re-encoded the same
 * way (the recorder below).
 */
#ifndef SG_PROTOCOLS_Q3_DEMO_H
#define SG_PROTOCOLS_Q3_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/q3/msg.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

struct sg_q3_demo_reader {
    FILE *f;
    bool own;          /* opened by us: closed by _finish */
    int protocol;      /* from the file name, 0 if unknown */
    uint64_t offset;   /* bytes consumed so far */
    uint64_t messages; /* messages returned */
    bool ended;        /* the end marker was read */
    bool truncated;    /* the file ended without it */
    size_t partial;    /* bytes of an incomplete block at the end */
};

/* Protocol from a demo file name's extension (".dm_68" -> 68); 0 if none. */
int sg_q3_demo_protocol_from_name(const char *path);

/* Open `path` for reading.  0 or -errno. */
int sg_q3_demo_reader_open(struct sg_q3_demo_reader *r, const char *path);

/* Read from `f` (borrowed, not closed), protocol given by the caller. */
void sg_q3_demo_reader_init(struct sg_q3_demo_reader *r, FILE *f, int protocol);

/* Close what _open opened; accepts NULL and a zeroed struct. */
void sg_q3_demo_reader_finish(struct sg_q3_demo_reader *r);

/*
 * Next message into `buf` (SG_Q3_MAX_MSGLEN bytes).  Returns 1 with
 * `*seq` and `*len` set; 0 at the end marker; SG_E_TRUNCATED when the file
 * ends without it (sets `truncated`, and `partial` for a cut block);
 * SG_E_TOOBIG / SG_E_MALFORMED for a length the game refuses; -errno on
 * read errors.
 */
int sg_q3_demo_read(struct sg_q3_demo_reader *r, int32_t *seq, uint8_t *buf, size_t *len);

struct sg_q3_demo_writer {
    FILE *f;
    bool own;
    uint64_t messages;
    int error; /* first write error, sticky */
};

/* Create `path` for writing.  0 or -errno. */
int sg_q3_demo_writer_open(struct sg_q3_demo_writer *w, const char *path);

/* Write to `f` (borrowed; _finish does not close it). */
void sg_q3_demo_writer_init(struct sg_q3_demo_writer *w, FILE *f);

/* Append one message block.  0 or a negative error (sticky). */
int sg_q3_demo_write(struct sg_q3_demo_writer *w, int32_t seq, const uint8_t *data, size_t len);

/* Write the end marker, flush, close what _open opened.  0 or the first error.  Accepts NULL. */
int sg_q3_demo_writer_finish(struct sg_q3_demo_writer *w);

/*
 * Append to `out` a svc_gamestate op synthesized from `st`: every set
 * configstring (index order, as CL_Record writes them), every baseline
 * received, clientNum and checksumFeed; `command_seq` is the server
 * command sequence the player starts from.  0 or a negative error.
 */
int sg_q3_record_gamestate(const struct sg_q3_state *st, int32_t command_seq,
                           struct sg_q3_svmsg *out);

/*
 * Append to `out` a svc_snapshot op for tracked frame `snap`, as the server
 * writes it: with `base` NULL without delta (the playerstate from zero,
 * every entity from its baseline, forced); otherwise delta'd from tracked
 * frame `base` (changed entities only, new ones from their baselines,
 * removals for the ones that left).  Both frames must live in `st`'s
 * rings; `base` must be 1..31 messages older and have a message number
 * above 0 (the game reads a delta from 0 or below as none, and so does
 * parse.c).  0, -EINVAL or -ENOMEM.
 */
int sg_q3_record_snapshot(const struct sg_q3_state *st, const struct sg_q3_snapshot *snap,
                          const struct sg_q3_snapshot *base, struct sg_q3_svmsg *out);

/* Tees a parsed stream into a demo writer, starting at any point. */
struct sg_q3_recorder {
    struct sg_q3_demo_writer *w; /* borrowed */
    bool started;
    int32_t have[SG_Q3_PACKET_BACKUP]; /* message numbers of frames in the file, by ring slot */
    bool have_valid[SG_Q3_PACKET_BACKUP];
    struct sg_q3_svmsg scratch;
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    uint64_t written, rewritten; /* messages written; of those, re-encoded */
};

/* Start a recorder writing to `w` (borrowed until _finish). */
void sg_q3_recorder_init(struct sg_q3_recorder *rec, struct sg_q3_demo_writer *w);

/* Free the recorder's buffers (does not finish the writer); accepts NULL. */
void sg_q3_recorder_finish(struct sg_q3_recorder *rec);

/*
 * Record one message just decoded into `msg` from `raw` (`len` bytes) with
 * state `st` (parse status `parse_err`).  Before the first write it waits
 * for a message with a valid snapshot (or a gamestate); it then writes a
 * synthesized gamestate and that message with its snapshot made non-delta.
 * Afterwards messages go out as received, except that a snapshot whose base
 * frame is not in the file is re-encoded without delta.  Returns 1 if a
 * message was written, 0 if skipped, or a negative error.
 */
int sg_q3_recorder_feed(struct sg_q3_recorder *rec, const struct sg_q3_state *st,
                        const struct sg_q3_svmsg *msg, int parse_err, const uint8_t *raw,
                        size_t len);

/* Counters of a whole-file operation. */
struct sg_q3_demo_stats {
    uint64_t messages;      /* read from the input */
    uint64_t decode_errors; /* input messages that failed to decode */
    uint64_t identical;     /* reencode: output messages equal to the input */
    uint64_t written;       /* messages written */
    uint64_t rewritten;     /* cut: messages re-encoded (gamestate and non-delta snapshots) */
    bool started;           /* cut: a snapshot in the span was found */
    int end;                /* 0, or the input's end error (SG_E_TRUNCATED ...) */
};

/*
 * Decode every message of `r`, encode it again and write it to `w`
 * (messages that do not decode are copied).  Does not finish `w`.
 * Returns 0 or a negative error (I/O, memory); input problems are counted.
 */
int sg_q3_demo_reencode(struct sg_q3_demo_reader *r, struct sg_q3_demo_writer *w,
                        struct sg_q3_demo_stats *stats);

/*
 * Write to `w` the part of `r` whose snapshots have server times in
 * [from, to]: a synthesized gamestate, the first snapshot in the span
 * without delta, then the messages up to the last snapshot not after `to`.
 * Does not finish `w`.  Returns 0 or a negative error.
 */
int sg_q3_demo_cut(struct sg_q3_demo_reader *r, struct sg_q3_demo_writer *w, int32_t from,
                   int32_t to, struct sg_q3_demo_stats *stats);

#endif
