/* Demo files on a full disk (demofile.h). */
#include "protocols/demofile.h"

#include "protocols/error.h"

#include <errno.h>
#include <stdio_ext.h>
#include <sys/types.h>
#include <unistd.h>

int sg_demo_file_whole(FILE *f, uint64_t *whole)
{
    off_t at;

    if (fflush(f) != 0)
        return sg_write_error();
    at = ftello(f);
    if (at < 0)
        return -errno;
    *whole = (uint64_t)at;
    return 0;
}

int sg_demo_file_cut(FILE *f, uint64_t whole)
{
    int fd;

    __fpurge(f);
    clearerr(f);
    fd = fileno(f);
    if (fd < 0)
        return -EBADF;
    if (ftruncate(fd, (off_t)whole) != 0 || fseeko(f, (off_t)whole, SEEK_SET) != 0)
        return -errno;
    return 0;
}
