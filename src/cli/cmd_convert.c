/* kipp convert DIR -o FILE.gguf [--quant SCHEME] [--checkpoint ID] [--allow-unpinned] */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "convert/convert.h"
#include "kipp.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kipp convert DIR -o FILE.gguf [--quant SCHEME] [--checkpoint ID]\n"
            "                    [--allow-unpinned]\n"
            "\n"
            "Converts a Hugging Face Qwen3 checkpoint directory (config.json, tokenizer.json,\n"
            "tokenizer_config.json, chat_template.jinja and generation_config.json if present,\n"
            "model.safetensors or shards with model.safetensors.index.json) into one GGUF\n"
            "artifact. The output is written to FILE.gguf.tmp and renamed when complete; an\n"
            "error, Ctrl-C or SIGTERM removes FILE.gguf.tmp.\n"
            "\n"
            "The directory must agree with exactly one registry entry in every value that\n"
            "identifies a checkpoint: the dimensions, max_position_embeddings,\n"
            "tie_word_embeddings, the eos/bos ids of config.json and generation_config.json,\n"
            "and a chat template for instruct entries. Otherwise the error lists the nearest\n"
            "entries and the values that differ.\n"
            "\n"
            "  -o, --output FILE    the artifact to write\n"
            "  --quant SCHEME       bf16 (default), q8_0, affine4_gs32 (Q4_1), scale4_gs32 (Q4_0);\n"
            "                       only the seven per-layer projections are quantized\n"
            "  --checkpoint ID      the registry entry this is (needed for synthetic checkpoints\n"
            "                       without kipp_checkpoint, and for same-shape entries); every\n"
            "                       value above must still agree with it; see `kipp registry`\n"
            "  --allow-unpinned     convert even when the directory shows another revision than\n"
            "                       the entry pins (a Hugging Face cache snapshot path, a\n"
            "                       huggingface_hub --local-dir .cache, or a git HEAD); the\n"
            "                       artifact records it as kipp.source.unpinned\n");
}

int cmd_convert(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    kipp_convert_options opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(a, "--quant") == 0 && i + 1 < argc) {
            opt.quant = argv[++i];
        } else if (strcmp(a, "--checkpoint") == 0 && i + 1 < argc) {
            opt.checkpoint_id = argv[++i];
        } else if (strcmp(a, "--allow-unpinned") == 0) {
            opt.allow_unpinned = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kipp convert: unknown or incomplete option '%s'\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "kipp convert: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!dir || !out) {
        usage(stderr);
        return 2;
    }
    cli_progress bar;
    cli_progress_init(&bar, "convert");
    opt.progress = cli_progress_update;
    opt.progress_ctx = &bar;
    opt.remove_tmp_on_signal = true;
    kipp_error err = {0};
    int rc = kipp_convert(dir, out, &opt, &err);
    cli_progress_finish(&bar);
    if (rc) {
        fprintf(stderr, "kipp convert: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "kipp convert: wrote %s\n", out);
    return 0;
}
