/* Flag values shared by several subcommands, parsed in one place so every
 * command accepts the same spellings and says the same thing when wrong. */
#ifndef KIPP_CLI_ARGS_H
#define KIPP_CLI_ARGS_H

#include <stdbool.h>

#include "kipp.h"

/* --backend ref|cpu. On a bad value prints "kipp CMD: unknown backend ..."
 * on stderr and returns false; the caller picks its exit status. */
bool cli_parse_backend(const char *command, const char *value, kipp_backend_kind *out);
/* --kv-quant bf16|q8_0, same contract. */
bool cli_parse_kv_quant(const char *command, const char *value, kipp_kv_quant *out);

/* KIPP_CPU_ISA=auto|avx512|avx2|generic -> options->cpu_isa (the library
 * reads no environment; the CLI is where the variable is honoured). Unset or
 * empty leaves the field alone. On a bad value prints "kipp CMD: ..." on
 * stderr and returns false. Every subcommand that opens a model calls it. */
bool cli_cpu_isa_from_env(const char *command, kipp_model_options *options);

#endif
