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
/* The --kv-quant spelling of a format (what cli_parse_kv_quant reads). */
const char *cli_kv_quant_name(kipp_kv_quant q);

/* --head bf16|q8_0 (kipp_model_options.head_quant: the output head as
 * stored, or a Q8_0 copy made at load), same contract. */
bool cli_parse_head(const char *command, const char *value, kipp_head_quant *out);

/* KIPP_CPU_ISA=auto|avx512|avx2|generic|avx512bf16|amx (the last two opt-in)
 * -> options->cpu_isa, and
 * KIPP_CPU_DECODE_PREFETCH=auto|rows|seq -> options->cpu_decode_prefetch (the
 * library reads no environment; the CLI is where the variables are
 * honoured). Unset or empty leaves a field alone. On a bad value prints
 * "kipp CMD: ..." on stderr and returns false. Every subcommand that opens a
 * model calls it. */
bool cli_cpu_isa_from_env(const char *command, kipp_model_options *options);

/* --threads N, short -t N, on every subcommand that computes (generate,
 * chat, ppl, serve, bench): the cpu backend's worker threads, 1..1024, or 0
 * (also the default) for one per online core; the ref backend is the
 * single-threaded oracle and ignores it. Decimal digits only, so "0x2",
 * "-1" and "" are refused rather than read as something else. */
#define CLI_MAX_THREADS 1024
bool cli_is_threads_flag(const char *arg);
bool cli_parse_threads(const char *command, const char *value, int *out);

#endif
