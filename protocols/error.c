/*
 * slipgate's error codes (error.h): their sentences and names, and the
 * error of a failed write.
 */
#include "protocols/error.h"

#include <errno.h>
#include <string.h>

static const char *const descs[] = {
#define SG__E_DESC(code, desc) desc,
    SG_ERROR_MAP(SG__E_DESC)
#undef SG__E_DESC
};

static const char *const names[] = {
#define SG__E_NAME(code, desc) "SG_E_" #code,
    SG_ERROR_MAP(SG__E_NAME)
#undef SG__E_NAME
};

const char *sg_strerror(int err)
{
    if (err >= 0)
        return "success";
    if (err > SG__E_FIRST && err < SG__E_LAST)
        return descs[err - SG__E_FIRST - 1];
    if (err > -4096)
        return strerror(-err);
    return "unknown error";
}

const char *sg_errname(int err)
{
    if (err >= 0)
        return "OK";
    if (err > SG__E_FIRST && err < SG__E_LAST)
        return names[err - SG__E_FIRST - 1];
    switch (-err) {
    case EINVAL:
        return "EINVAL";
    case ENOMEM:
        return "ENOMEM";
    case ENOENT:
        return "ENOENT";
    case EAGAIN:
        return "EAGAIN";
    case ENOSPC:
        return "ENOSPC";
    case EACCES:
        return "EACCES";
    case EADDRINUSE:
        return "EADDRINUSE";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case EMSGSIZE:
        return "EMSGSIZE";
    case ERANGE:
        return "ERANGE";
    case EIO:
        return "EIO";
    default:
        return "E?";
    }
}

int sg_write_error(void)
{
    return errno > 0 ? -errno : -EIO;
}
