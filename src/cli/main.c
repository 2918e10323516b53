/* `kipp`: one binary, one subcommand per capability. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "kipp.h"

static int cmd_registry(int argc, char **argv);

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static command commands[16];
static size_t n_commands;

static void add(const char *name, int (*run)(int, char **), const char *summary) {
    commands[n_commands++] = (command){name, run, summary};
}

static void build_table(void) {
    add("synth", cmd_synth, "write a synthetic checkpoint (Hugging Face layout)");
    add("convert", cmd_convert, "convert a Hugging Face checkpoint to a GGUF artifact");
    add("info", cmd_info, "validate an artifact and print its entry, metadata, tensors");
    add("tokenize", cmd_tokenize, "text to token ids");
    add("detokenize", cmd_detokenize, "token ids to text");
    add("generate", cmd_generate, "generate text from a prompt");
    add("chat", cmd_chat, "interactive chat (instruct entries)");
    add("ppl", cmd_ppl, "perplexity over a token stream");
    add("serve", cmd_serve, "OpenAI-compatible HTTP server");
    add("bench", cmd_bench, "prefill and decode throughput");
    add("registry", cmd_registry, "print the compiled-in registry as TSV");
}

static void usage(FILE *out) {
    fprintf(out, "usage: kipp COMMAND [ARGS]   (kipp COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < n_commands; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
}

/* Same columns as ../shared/checkpoints.tsv so a test can diff them. */
static int cmd_registry(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: kipp registry\nPrints the compiled-in registry in checkpoints.tsv's columns.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "kipp registry: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("id\tsource_repository\trevision\tvariant\tlayers\thidden\tffn\theads\t"
           "context\trope_theta\ttied\teos\tstops\n");
    for (size_t i = 0; i < kipp_registry_count(); i++) {
        const kipp_checkpoint *c = kipp_registry_at(i);
        printf("%s\t%s\t%s\t%s\t%u\t%u\t%u\t%u\t%u\t%.0f\t%s\t%d\t", c->id,
               c->source_repository, c->revision, kipp_variant_name(c->variant),
               c->layers, c->hidden, c->ffn, c->heads, c->context, c->rope_theta,
               c->tied ? "yes" : "no", c->eos);
        for (uint32_t s = 0; s < c->n_stops; s++)
            printf("%s%d", s ? "," : "", c->stops[s]);
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    build_table();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("kipp %s\n", KIPP_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < n_commands; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "kipp: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
