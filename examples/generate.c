/* A whole libkipp program: load an artifact, stream a greedy completion of
 * a prompt, print timings (docs/API.md walks through it).
 *   cc generate.c $(pkg-config --cflags --libs kipp) -o generate
 *   ./generate model.gguf "Once upon a time" 32
 * The text streams to stdout; the generated ids (a stop token included) and
 * the timings go to stderr. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <kipp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]);
        return 2;
    }
    int n_gen = argc > 3 ? atoi(argv[3]) : 32, n_done = 0;
    kipp_error err = {0};
    kipp_model *model = NULL;
    kipp_session *session = NULL;
    kipp_sampler *sampler = NULL;
    kipp_detok_stream *stream = NULL;
    int32_t *prompt = NULL, *out = calloc((size_t)n_gen + 1, sizeof *out); /* generated ids */
    size_t n_prompt = 0, len = 0;
    float *logits = malloc(sizeof(float) * KIPP_VOCAB_SIZE); /* one row */
    kipp_sampling greedy = kipp_sampling_default();          /* temperature 0 */
    kipp_model_options mo = {.backend = KIPP_BACKEND_CPU};   /* all cores, best tier */
    char text[512];
    int rc = 1;
    double t0 = now();
    if (!logits || !out || kipp_model_open(argv[1], &mo, &model, &err) ||
        kipp_tokenize(model, argv[2], strlen(argv[2]), &prompt, &n_prompt, &err) ||
        kipp_session_create(model, &(kipp_session_options){.capacity = n_prompt + n_gen},
                            &session, &err) ||
        kipp_sampler_create(&greedy, &sampler, &err) ||
        kipp_detok_stream_create(model, &stream, &err))
        goto done;
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    if (ck->synthetic) fprintf(stderr, "note: %s has random weights: meaningless text\n", ck->id);
    /* The prompt in one call; logits only for its last position. */
    kipp_eval_item item = {session, prompt, (uint32_t)n_prompt, 1, logits};
    double t1 = now();
    if (kipp_eval(model, &item, 1, &err)) goto done;
    double t2 = now();
    while (n_done < n_gen) {
        int32_t id = out[n_done++] = kipp_sampler_sample(sampler, logits);
        int stop = 0;
        for (uint32_t s = 0; s < ck->n_stops; s++) stop |= id == ck->stops[s];
        if (stop) break;
        if (kipp_detok_stream_push(stream, id, text, sizeof text, &len, &err)) goto done;
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        item = (kipp_eval_item){session, &out[n_done - 1], 1, 1, logits}; /* append it */
        if (n_done < n_gen && kipp_eval(model, &item, 1, &err)) goto done;
    }
    if (kipp_detok_stream_flush(stream, text, sizeof text, &len) == KIPP_OK)
        fwrite(text, 1, len, stdout);
    printf("\n");
    double t3 = now();
    fprintf(stderr, "ids:");
    for (int i = 0; i < n_done; i++) fprintf(stderr, "%s%d", i ? "," : " ", (int)out[i]);
    fprintf(stderr, "\nlibkipp %s: load %.3f s; prompt %zu tokens, %.1f tok/s; "
            "%d generated, %.1f tok/s\n",
            kipp_version(), t1 - t0, n_prompt, n_prompt / (t2 - t1), n_done, n_done / (t3 - t2));
    rc = 0;
done:
    if (rc) fprintf(stderr, "error %d: %s\n", err.code, err.message);
    kipp_detok_stream_destroy(stream);
    kipp_sampler_destroy(sampler);
    kipp_session_destroy(session);
    kipp_model_close(model);
    free(prompt);
    free(logits);
    free(out);
    return rc;
}
