/*
 * Client pseudonyms (`anonymize yes`): a keyed hash of the client's IP
 * address stands for the client wherever slipgate writes it (logs,
 * --stats, demo names, .sig metadata, textlog and inspect output, the
 * HTTP pages, pcap captures), so recordings can be published without the
 * players' addresses.
 *
 * The key is a per-installation secret: 32 random bytes in a file that is
 * created (mode 0600) on first use and refused when group or others may
 * read or write it.  The pseudonym is BLAKE2b (libsodium
 * crypto_generichash) keyed with it over the IP address only (an IPv4
 * address and its IPv4-mapped IPv6 form are one), so a player keeps one
 * pseudonym across NAT port changes, reconnects and restarts for as long
 * as the key file is kept; another key gives unrelated pseudonyms.
 *
 * Text form: "anon-" and 8 hex digits.  Address form (pcap captures): an
 * IPv4 client becomes an address in 198.18.0.0/15 (RFC 2544, never
 * routed), an IPv6 client one in 2001:db8::/32 (RFC 3849), from the same
 * hash; the port becomes 1024-65535 from a keyed hash of address and port,
 * so two players behind one NAT stay two flows.
 */
#ifndef SG_FILTERS_ANON_H
#define SG_FILTERS_ANON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SG_ANON_KEY_BYTES 32
#define SG_ANON_NAME_LEN  13 /* "anon-" + 8 hex digits */

struct sg_anon_key {
    uint8_t k[SG_ANON_KEY_BYTES];
};

/*
 * The default key file: $STATE_DIRECTORY/anonymize.key (systemd's
 * StateDirectory=), else $XDG_STATE_HOME/slipgate/anonymize.key, else
 * $HOME/.local/state/slipgate/anonymize.key.  Writes it into `buf`;
 * returns `buf`, or NULL when none of these is set (or it does not fit).
 */
char *sg_anon_default_path(char *buf, size_t cap);

/*
 * Read the key file at `path`; when it does not exist, create it (and its
 * directory, mode 0700) with a fresh random key, mode 0600, never over a
 * file that appeared meanwhile.  Refused with SG_E_CONFIG when group or
 * others may read or write it, or when it is not a slipgate anonymize key;
 * a negative errno when it cannot be read or made.  A sentence naming the
 * file is in `why` on failure.  *created tells whether it was made now
 * (may be NULL).
 */
int sg_anon_key_load(const char *path, struct sg_anon_key *key, bool *created, char *why,
                     size_t whylen);

/* Wipe a key from memory.  NULL ok. */
void sg_anon_key_wipe(struct sg_anon_key *key);

/*
 * The client's pseudonym "anon-XXXXXXXX" into `out` (at least
 * SG_ANON_NAME_LEN + 1 bytes); an address of another family gives
 * "anon-unknown".  Returns `out`.
 */
char *sg_anon_name(const struct sg_anon_key *key, const struct sockaddr *sa, char *out, size_t cap);

/*
 * The client's pseudonymous address and port (same family as `sa`; an
 * IPv4-mapped address stays mapped) into `out`.  0, or -EAFNOSUPPORT.
 */
int sg_anon_addr(const struct sg_anon_key *key, const struct sockaddr *sa,
                 struct sockaddr_storage *out);

#endif
