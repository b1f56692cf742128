/*
 * The scraper of the `slipgate-http` mode: a thread that fetches
 * http://127.0.0.1:PORT/metrics every 100 ms for as long as the relay
 * runs, as a Prometheus server polling far more often than usual would.
 * Each scrape is counted as good (a 200 answer with the datagram counter
 * in it) or failed.
 */
#include "tests/bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SCRAPE_INTERVAL_NS 100000000ull
#define SCRAPE_BUF         (1 << 20)

int sg_bench_free_tcp_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int fd, port;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
        port = -errno;
    else
        port = ntohs(sin.sin_port);
    close(fd);
    return port;
}

const char *sg_bench_http_get(uint16_t port, const char *path, char *buf, size_t cap)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = 2};
    char req[256];
    size_t got = 0;
    int fd, n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    const char *body = NULL;

    if (n < 0 || (size_t)n >= sizeof(req) || cap < 2)
        return NULL;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        send(fd, req, (size_t)n, MSG_NOSIGNAL) == (ssize_t)n) {
        for (int i = 0; i < 10000 && got < cap - 1; i++) {
            ssize_t r = recv(fd, buf + got, cap - 1 - got, 0);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        buf[got] = '\0';
        if (strncmp(buf, "HTTP/1.1 200", 12) == 0 && (body = strstr(buf, "\r\n\r\n")))
            body += 4;
    }
    close(fd);
    return body;
}

/* One GET /metrics; true when it answered 200 with the counter in it. */
static bool scrape_once(uint16_t port, char *buf)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = 1};
    static const char req[] =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    size_t got = 0;
    bool ok = false;
    int fd;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(req) - 1)) {
        for (int i = 0; i < 1000 && got < SCRAPE_BUF - 1; i++) {
            ssize_t n = recv(fd, buf + got, SCRAPE_BUF - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        buf[got] = '\0';
        ok = strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "slipgate_datagrams_total");
    }
    close(fd);
    return ok;
}

static void *scraper_main(void *arg)
{
    struct sg_bench_scraper *s = arg;
    uint64_t next = sg_bench_now_ns();

    while (!atomic_load(&s->stop)) {
        uint64_t now;
        if (scrape_once(s->port, s->buf))
            atomic_fetch_add(&s->ok, 1);
        else
            atomic_fetch_add(&s->failed, 1);
        next += SCRAPE_INTERVAL_NS;
        now = sg_bench_now_ns();
        if (next > now) {
            struct timespec ts = {.tv_sec = (time_t)((next - now) / 1000000000ull),
                                  .tv_nsec = (long)((next - now) % 1000000000ull)};
            nanosleep(&ts, NULL);
        } else {
            next = now;
        }
    }
    return NULL;
}

int sg_bench_scraper_start(struct sg_bench_scraper *s, uint16_t port)
{
    int err;

    memset(s, 0, sizeof(*s));
    s->port = port;
    s->buf = malloc(SCRAPE_BUF);
    if (!s->buf)
        return -ENOMEM;
    err = pthread_create(&s->thread, NULL, scraper_main, s);
    if (err) {
        free(s->buf);
        s->buf = NULL;
        return -err;
    }
    s->running = true;
    return 0;
}

void sg_bench_scraper_stop(struct sg_bench_scraper *s)
{
    if (!s->running)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    s->running = false;
    free(s->buf);
    s->buf = NULL;
}
