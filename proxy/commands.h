/*
 * Subcommands of the slipgate binary.  Each takes the arguments after the
 * subcommand's name (argv[0] is the subcommand itself) and returns the
 * process exit status: 0 success, 1 errors found, 2 usage error.
 */
#ifndef SG_PROXY_COMMANDS_H
#define SG_PROXY_COMMANDS_H

int sg_cmd_demo(int argc, char **argv);

#endif
