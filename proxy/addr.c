/* Socket address helpers; see addr.h. */
#include "proxy/addr.h"

#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static bool is_v4_mapped(const struct sockaddr_in6 *s6)
{
    return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr);
}

char *sg_addr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN];

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        snprintf(buf, cap, "%s:%d", host, ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        if (is_v4_mapped(s6)) {
            inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, sizeof(host));
            snprintf(buf, cap, "%s:%d", host, ntohs(s6->sin6_port));
        } else {
            inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
            snprintf(buf, cap, "[%s]:%d", host, ntohs(s6->sin6_port));
        }
    } else {
        snprintf(buf, cap, "(family %d)", sa->sa_family);
    }
    return buf;
}

int sg_addr_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

void sg_addr_set_port(struct sockaddr *sa, int port)
{
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
}

socklen_t sg_addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

bool sg_addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a;
        const struct sockaddr_in *y = (const struct sockaddr_in *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0 &&
               x->sin6_scope_id == y->sin6_scope_id;
    }
    return false;
}

size_t sg_addr_host_key(const struct sockaddr *sa, unsigned char key[16])
{
    if (sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        if (is_v4_mapped(s6)) {
            memcpy(key, &s6->sin6_addr.s6_addr[12], 4);
            return 4;
        }
        memcpy(key, &s6->sin6_addr, 16);
        return 16;
    }
    return 0;
}

size_t sg_addr_source_key(const struct sockaddr *sa, int prefix6, unsigned char key[16])
{
    size_t n = sg_addr_host_key(sa, key);

    if (n == 16 && prefix6 >= 0 && prefix6 < 128) {
        size_t whole = (size_t)prefix6 / 8;
        if (prefix6 % 8)
            key[whole++] &= (unsigned char)(0xffu << (8 - prefix6 % 8));
        memset(key + whole, 0, 16 - whole);
    }
    return n;
}

int sg_addr_resolve(uv_loop_t *loop, const char *spec, bool passive, struct sockaddr_storage *out,
                    char *why, size_t whycap)
{
    char host[256], port[16];
    struct addrinfo hints;
    uv_getaddrinfo_t req;
    const char *node;
    int err;

    /* Split the spec the way the config reader checked it. */
    if (sg_conf_split_addr(spec, host, sizeof(host), port, sizeof(port)) < 0) {
        snprintf(why, whycap, "'%s' is not HOST:PORT", spec);
        return UV_EINVAL;
    }
    node = (host[0] == '\0' || strcmp(host, "*") == 0) ? NULL : host;

    /* Numeric ports only; any family; datagram sockets. */
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    if (!node && passive)
        hints.ai_family = AF_INET;
    err = uv_getaddrinfo(loop, &req, NULL, node, port, &hints);
    if (err < 0) {
        snprintf(why, whycap, "cannot resolve '%s': %s", spec, uv_strerror(err));
        return err;
    }

    /* Take the first answer. */
    memset(out, 0, sizeof(*out));
    memcpy(out, req.addrinfo->ai_addr, req.addrinfo->ai_addrlen);
    uv_freeaddrinfo(req.addrinfo);
    return 0;
}

int sg_addr_try_bind(const struct sockaddr *sa)
{
    int off = 0, err;
    int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    if (sa->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, sa, sg_addr_len(sa)) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* Split "ADDR[...]" into the address text and what follows it. */
static int split_host(const char *text, char *host, size_t cap, const char **rest)
{
    const char *end;
    size_t n;

    if (text[0] == '[') {
        if (!(end = strchr(text, ']')))
            return -EINVAL;
        n = (size_t)(end - text - 1);
        *rest = end + 1;
        text++;
    } else {
        end = text + strcspn(text, "/:");
        n = (size_t)(end - text);
        *rest = end;
    }
    if (n == 0 || n >= cap)
        return -EINVAL;
    memcpy(host, text, n);
    host[n] = 0;
    return 0;
}

static int host_key(const char *host, unsigned char key[16], size_t *keylen)
{
    struct in6_addr a6;

    if (inet_pton(AF_INET, host, key) == 1) {
        *keylen = 4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_V4MAPPED(&a6)) {
            memcpy(key, (unsigned char *)&a6 + 12, 4);
            *keylen = 4;
        } else {
            memcpy(key, &a6, 16);
            *keylen = 16;
        }
        return 0;
    }
    return -EINVAL;
}

static int parse_port(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9' && v <= 65535)
        v = v * 10 + (*p++ - '0');
    *end = p;
    return p == s || v < 1 || v > 65535 ? -1 : (int)v;
}

int sg_addr_rule_parse(const char *text, struct sg_addr_rule *out, char *why, size_t whycap)
{
    char host[64];
    const char *rest, *e;

    memset(out, 0, sizeof(*out));
    if (split_host(text, host, sizeof(host), &rest) < 0 ||
        host_key(host, out->key, &out->keylen) < 0) {
        snprintf(why, whycap, "\"%s\": not a numeric address (ADDR[/BITS][:PORT[-PORT]])", text);
        return -EINVAL;
    }
    out->bits = (int)out->keylen * 8;
    out->port_low = 1;
    out->port_high = 65535;
    if (*rest == '/') {
        long b = 0;
        const char *p = ++rest;
        while (*p >= '0' && *p <= '9' && b <= 128)
            b = b * 10 + (*p++ - '0');
        if (p == rest || b > out->bits) {
            snprintf(why, whycap, "\"%s\": prefix length 0-%d expected after '/'", text,
                     out->bits);
            return -EINVAL;
        }
        out->bits = (int)b;
        rest = p;
    }
    if (*rest == ':') {
        if ((out->port_low = parse_port(rest + 1, &e)) < 0) {
            snprintf(why, whycap, "\"%s\": port 1-65535 expected after ':'", text);
            return -EINVAL;
        }
        out->port_high = out->port_low;
        if (*e == '-' && ((out->port_high = parse_port(e + 1, &e)) < out->port_low)) {
            snprintf(why, whycap, "\"%s\": port range LOW-HIGH expected", text);
            return -EINVAL;
        }
        rest = e;
    }
    if (*rest) {
        snprintf(why, whycap, "\"%s\": unexpected \"%s\" (ADDR[/BITS][:PORT[-PORT]])", text, rest);
        return -EINVAL;
    }
    return 0;
}

bool sg_addr_rule_match(const struct sg_addr_rule *rule, const struct sockaddr *sa)
{
    unsigned char key[16];
    size_t n = sg_addr_host_key(sa, key);
    int port = sg_addr_port(sa), full = rule->bits / 8, part = rule->bits % 8;

    if (n != rule->keylen || port < rule->port_low || port > rule->port_high)
        return false;
    if (memcmp(key, rule->key, (size_t)full) != 0)
        return false;
    if (part) {
        unsigned char mask = (unsigned char)(0xff << (8 - part));
        if ((key[full] & mask) != (rule->key[full] & mask))
            return false;
    }
    return true;
}

int sg_addr_parse_numeric(const char *text, int default_port, struct sockaddr_storage *out)
{
    char host[64];
    const char *rest, *e;
    int port = default_port;

    memset(out, 0, sizeof(*out));
    if (split_host(text, host, sizeof(host), &rest) < 0 || *rest == '/')
        return -EINVAL;
    if (*rest == ':') {
        if ((port = parse_port(rest + 1, &e)) < 0 || *e)
            return -EINVAL;
    } else if (*rest) {
        return -EINVAL;
    }
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)out)->sin_addr) == 1) {
        out->ss_family = AF_INET;
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)out)->sin6_addr) == 1) {
        out->ss_family = AF_INET6;
    } else {
        return -EINVAL;
    }
    sg_addr_set_port((struct sockaddr *)out, port);
    return 0;
}
