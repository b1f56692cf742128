/*
 * `slipgate play [GAME] [--with-client] [--seconds N] [--basedir DIR] [--dir DIR]`:
 * the playground.  A local scene (a real game server with bots, this
 * slipgate in front of it with `inspect`, recording and its web page, and
 * optionally a headless real client) is set up by the script
 * scripts/slipgate-play, installed as LIBEXECDIR/slipgate/slipgate-play;
 * this command finds it and runs it in its place, telling it which binary
 * to run (SLIPGATE).  No game code here: the script only starts the games'
 * own programs.
 */
#include "proxy/cli/commands.h"

#include "sg_play.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directory of the running binary into `dir` (no trailing slash); -1 when unknown. */
static int self_dir(char *exe, size_t exe_size, char *dir, size_t dir_size)
{
    ssize_t n = readlink("/proc/self/exe", exe, exe_size - 1);
    if (n <= 0 || (size_t)n >= exe_size - 1)
        return -1;
    exe[n] = '\0';
    const char *slash = strrchr(exe, '/');
    if (!slash || (size_t)(slash - exe) >= dir_size)
        return -1;
    memcpy(dir, exe, (size_t)(slash - exe));
    dir[slash - exe] = '\0';
    return 0;
}

/*
 * The script beside this binary: the source tree's when this is the build
 * tree's binary, else LIBEXECDIR relative to the binary's prefix (a staged
 * or moved install), else the configured LIBEXECDIR.
 */
static const char *find_script(const char *dir, char *buf, size_t size)
{
    if (dir && strcmp(dir, SG_PLAY_BUILD_DIR) == 0 && access(SG_PLAY_SOURCE, X_OK) == 0)
        return SG_PLAY_SOURCE;
    if (dir && SG_PLAY_LIBEXEC_REL[0] != '\0') {
        int n = snprintf(buf, size, "%s/../%s/slipgate/slipgate-play", dir, SG_PLAY_LIBEXEC_REL);
        if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0)
            return buf;
    }
    if (access(SG_PLAY_INSTALLED, X_OK) == 0)
        return SG_PLAY_INSTALLED;
    return NULL;
}

int sg_cmd_play(int argc, char **argv)
{
    char exe[PATH_MAX], dir[PATH_MAX], buf[PATH_MAX + 64];
    bool have_dir = self_dir(exe, sizeof(exe), dir, sizeof(dir)) == 0;
    const char *script = find_script(have_dir ? dir : NULL, buf, sizeof(buf));

    if (!script) {
        fprintf(stderr, "slipgate play: the playground script is not installed (looked for %s)\n",
                SG_PLAY_INSTALLED);
        return 1;
    }
    if (have_dir && setenv("SLIPGATE", exe, 1) < 0) {
        fprintf(stderr, "slipgate play: %s\n", strerror(errno));
        return 1;
    }
    /* argv[0] ("play") becomes the script's name; the rest pass through. */
    static char name[PATH_MAX + 64];
    snprintf(name, sizeof(name), "%s", script);
    argv[0] = name;
    (void)argc;
    execv(name, argv);
    fprintf(stderr, "slipgate play: cannot run %s: %s\n", script, strerror(errno));
    return 1;
}
