/*
 * Socket address helpers: formatting, comparison, hashing keys and
 * resolution through libuv.  IPv4-mapped IPv6 addresses (what a dual-stack
 * [::] listener reports for IPv4 clients) are shown as plain IPv4.
 */
#ifndef SG_PROXY_ADDR_H
#define SG_PROXY_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <uv.h>

#define SG_ADDR_STRLEN 64 /* "[ffff:...:ffff]:65535" with room to spare */

/* Writes "1.2.3.4:27960" or "[::1]:27960" into `buf`; returns `buf`. */
char *sg_addr_format(const struct sockaddr *sa, char *buf, size_t cap);
/* Port in host order, 0 for an unknown family. */
int sg_addr_port(const struct sockaddr *sa);
/* Set the port (host order) of an IPv4 or IPv6 address. */
void sg_addr_set_port(struct sockaddr *sa, int port);
/* Length of the sockaddr for its family. */
socklen_t sg_addr_len(const struct sockaddr *sa);

/* Bind a datagram socket to `sa` as a route's listener would (IPv6 takes
 * IPv4 too); returns it, or a negative errno. */
int sg_addr_try_bind(const struct sockaddr *sa);
/* Same family, address and port. */
bool sg_addr_equal(const struct sockaddr *a, const struct sockaddr *b);
/*
 * The bytes that identify the host part only (for per-source limits):
 * 4 bytes for IPv4 and IPv4-mapped IPv6, 16 for IPv6.  Returns the length.
 */
size_t sg_addr_host_key(const struct sockaddr *sa, unsigned char key[16]);
/*
 * The bytes that identify a source for the per-source limits: as
 * sg_addr_host_key, but an IPv6 address (not IPv4-mapped) is cut to its
 * first `prefix6` bits (the rest zero), since one IPv6 host commonly holds
 * a whole /64 and could otherwise change address at will.  Returns the
 * length (4 or 16; 0 for an unknown family).
 */
size_t sg_addr_source_key(const struct sockaddr *sa, int prefix6, unsigned char key[16]);

/*
 * Resolve "host:port" (the config's ADDR syntax; "*" or empty host means the
 * wildcard, which `passive` selects for listening) synchronously through
 * libuv.  Stores the first result in `out`.  On failure returns a negative
 * libuv error and writes a human-readable reason into `why`.
 */
int sg_addr_resolve(uv_loop_t *loop, const char *spec, bool passive, struct sockaddr_storage *out,
                    char *why, size_t whycap);

/*
 * An address rule (the `route_by prx` allow-list): "ADDR[/BITS][:PORT[-PORT]]",
 * IPv6 in brackets ("[2001:db8::]/32:27500-27600"); no port: any.  Numeric
 * addresses only.  IPv4-mapped IPv6 addresses match as IPv4.
 */
struct sg_addr_rule {
    unsigned char key[16]; /* as sg_addr_host_key */
    size_t keylen;         /* 4 or 16 */
    int bits;              /* prefix length */
    int port_low, port_high;
};
/* 0, or -EINVAL with the reason in `why`. */
int sg_addr_rule_parse(const char *text, struct sg_addr_rule *out, char *why, size_t whycap);
bool sg_addr_rule_match(const struct sg_addr_rule *rule, const struct sockaddr *sa);
/*
 * A numeric "ADDR[:PORT]" ("1.2.3.4:27500", "[::1]:27500"; no port:
 * `default_port`) into `out`: 0, or -EINVAL (a name, a bad port).
 */
int sg_addr_parse_numeric(const char *text, int default_port, struct sockaddr_storage *out);

#endif
