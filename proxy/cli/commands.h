/*
 * Offline subcommands of the slipgate binary.  Each takes the arguments
 * after the program name, argv[0] being the subcommand itself, prints to
 * stdout/stderr and returns the process exit code: 0 ok, 1 errors found
 * (or a file could not be read or written), 2 usage error.
 */
#ifndef SG_PROXY_CLI_COMMANDS_H
#define SG_PROXY_CLI_COMMANDS_H

/* `slipgate demo info|dump|reencode|cut ...`: per game, readers from the codec table. */
int sg_cmd_demo(int argc, char **argv);

/* `slipgate pcap decode FILE [--json] [--record DIR] [-p NAME]`: a capture's game sessions. */
int sg_cmd_pcap(int argc, char **argv);

/* `slipgate keygen [--out PREFIX]`: a key pair for `sign_key`. */
int sg_cmd_keygen(int argc, char **argv);

/* `slipgate demo verify FILE [--key K|--keyfile F] [--json]`: any recording against FILE.sig. */
int sg_cmd_demo_verify(int argc, char **argv);

/*
 * `slipgate doctor [-c FILE] [-l|-s|-p|--record ...] [--timeout D] [--min-free SIZE]
 * [+set NAME VALUE]...`: one ok/warn/fail line per check of what the start
 * and the first hours would meet (ports, servers, directories, caps, keys).
 */
int sg_cmd_doctor(int argc, char **argv);
/* `slipgate play [GAME] [OPTIONS]`: runs the playground script in this process's place; returns only on failure. */
int sg_cmd_play(int argc, char **argv);

#endif
