/*
 * Master servers: a route's heartbeats (`master HOST:PORT ...`).
 *
 * The route owns one per loop.  It sends the game's heartbeat (the codec's
 * struct sg_codec_master) from the route's listening socket, so that the
 * master lists slipgate's address and port: on worker 0 once at start and
 * then every `master_interval` (the game's own period by default); on
 * every loop when a session's server announces a new level; and the game's
 * shutdown message when the route closes.  A game whose heartbeat carries
 * the server's status (QuakeWorld, Quake 2) first asks the server with the
 * codec's status query from a socket of its own, one query at a time, and
 * sends nothing when the server does not answer within a second.
 *
 * The master's own queries (getinfo, status, ...) come to the listening
 * socket and reach the server through an ordinary session.
 */
#ifndef SG_PROXY_MASTER_H
#define SG_PROXY_MASTER_H

#include "proxy/conf.h"
#include "proxy/ctx.h"
#include "protocols/codec.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct sg_master;

/*
 * What the master engine is given by its route: the loop's context, the
 * route's name for the log, and hooks counting its libuv handles among the
 * route's (`opened` once per handle it starts, `closed` once each close
 * callback has run).
 */
struct sg_master_owner {
    const struct sg_ctx *ctx;
    const char *name;
    void *data;
    void (*opened)(void *data);
    void (*closed)(void *data);
};

/*
 * Resolve master `spec` (HOST:PORT, [IPv6]:PORT) for a listening socket of
 * family `listen_family` (an IPv4 listener reaches IPv4 masters only; an
 * IPv6 one, dual-stack, both: IPv4 answers come back v4-mapped).  0, or a
 * negative error with the reason in `why`.
 */
int sg_master_resolve(const char *spec, int listen_family, struct sockaddr_storage *out, char *why,
                      size_t whycap);

/*
 * The heartbeat engine of a route of game `game` (which has master hooks):
 * `rc`'s `master` list (`file`: the config file's name for errors, NULL
 * for the command line), sent from `listen_fd`, bound to `listen_addr`,
 * for the server `server`.  Returns 0 and *out, or a negative error,
 * logged with the file and line of the master that did not resolve.
 */
int sg_master_create(const struct sg_master_owner *owner, const struct sg_codec *game,
                     const struct sg_route_conf *rc, const char *file, int listen_fd,
                     const struct sockaddr *listen_addr, const struct sockaddr *server,
                     struct sg_master **out);
/*
 * A reload: the new master list (resolved again), interval and server.  On
 * a master that does not resolve, keeps the old list and returns the
 * error (logged with file and line).
 */
int sg_master_update(struct sg_master *m, const struct sg_route_conf *rc, const char *file,
                     const struct sockaddr *server);
/* The server announced level `level` to a session: a new one sends a heartbeat now. */
void sg_master_level(struct sg_master *m, const char *level);
/* slipgate drains (SIGTERM with drain_timeout): the masters hear at once that the route
 * goes (the game's shutdown message), and no heartbeat follows. */
void sg_master_drain(struct sg_master *m);
/* Send the game's shutdown message (when `shutdown`, unless drained) and close the handles. */
void sg_master_close(struct sg_master *m, bool shutdown);
/* Free it once closed and its handles' callbacks have run (accepts NULL). */
void sg_master_destroy(struct sg_master *m);

#endif
