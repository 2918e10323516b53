/* Subcommands of the `kipp` binary. Each lives in its own cmd_*.c, reaches
 * the engine through include/kipp.h (convert/synth use src/convert), prints
 * errors on stderr and returns the process exit status. */
#ifndef KIPP_CLI_COMMANDS_H
#define KIPP_CLI_COMMANDS_H

#define KIPP_COMMAND(name) int name(int argc, char **argv)

KIPP_COMMAND(cmd_synth);
KIPP_COMMAND(cmd_convert);
KIPP_COMMAND(cmd_info);
KIPP_COMMAND(cmd_tokenize);
KIPP_COMMAND(cmd_detokenize);
KIPP_COMMAND(cmd_generate);
KIPP_COMMAND(cmd_chat);
KIPP_COMMAND(cmd_ppl);
KIPP_COMMAND(cmd_serve);
KIPP_COMMAND(cmd_bench);

#endif
