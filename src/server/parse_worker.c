/* The request-parsing thread; see parse_worker.h. Two lists under one
 * mutex (todo, done); a self-pipe wakes the loop's poll() when a job is
 * done. */
#include "server/parse_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct parse_worker {
    kipp_model *model;
    api_limits limits;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    parse_job *todo_head, *todo_tail;
    parse_job *done_head, *done_tail;
    bool stopping;
    int pipe_fd[2]; /* [0] polled by the loop, [1] written by the worker */
};

static void push(parse_job **head, parse_job **tail, parse_job *j) {
    j->next = NULL;
    if (*tail) (*tail)->next = j;
    else *head = j;
    *tail = j;
}

static parse_job *pop(parse_job **head, parse_job **tail) {
    parse_job *j = *head;
    if (!j) return NULL;
    *head = j->next;
    if (!*head) *tail = NULL;
    j->next = NULL;
    return j;
}

static void *run(void *arg) {
    parse_worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->todo_head && !w->stopping) pthread_cond_wait(&w->wake, &w->lock);
        if (w->stopping) break;
        parse_job *j = pop(&w->todo_head, &w->todo_tail);
        pthread_mutex_unlock(&w->lock);
        j->rc = api_parse_request(w->model, j->kind, &w->limits, j->body, j->length, &j->request,
                                  &j->error);
        pthread_mutex_lock(&w->lock);
        push(&w->done_head, &w->done_tail, j);
        /* One byte per job; a full pipe already means "look". */
        (void)!write(w->pipe_fd[1], "", 1);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int parse_worker_start(kipp_model *model, const api_limits *limits, parse_worker **out) {
    *out = NULL;
    parse_worker *w = calloc(1, sizeof *w);
    if (!w) return 1;
    w->model = model;
    w->limits = *limits;
    if (pipe(w->pipe_fd)) {
        free(w);
        return 1;
    }
    for (int i = 0; i < 2; i++)
        fcntl(w->pipe_fd[i], F_SETFL, fcntl(w->pipe_fd[i], F_GETFL) | O_NONBLOCK);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, run, w)) {
        close(w->pipe_fd[0]);
        close(w->pipe_fd[1]);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w);
        return 1;
    }
    *out = w;
    return 0;
}

void parse_job_free(parse_job *j) {
    if (!j) return;
    api_request_free(&j->request);
    free(j->body);
    free(j);
}

void parse_worker_stop(parse_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    parse_job *j;
    while ((j = pop(&w->todo_head, &w->todo_tail))) parse_job_free(j);
    while ((j = pop(&w->done_head, &w->done_tail))) parse_job_free(j);
    close(w->pipe_fd[0]);
    close(w->pipe_fd[1]);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    free(w);
}

int parse_worker_fd(const parse_worker *w) { return w->pipe_fd[0]; }

void parse_worker_submit(parse_worker *w, parse_job *j) {
    pthread_mutex_lock(&w->lock);
    push(&w->todo_head, &w->todo_tail, j);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

parse_job *parse_worker_take(parse_worker *w) {
    char drain[64];
    while (read(w->pipe_fd[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&w->lock);
    parse_job *j = pop(&w->done_head, &w->done_tail);
    pthread_mutex_unlock(&w->lock);
    return j;
}
