/* Constrained decoding, inside the library. A grammar is a small tree of
 * nodes compiled from a JSON Schema (grammar_schema.c) or built for a tool
 * call; grammar.c runs it as a byte-level pushdown automaton and turns each
 * automaton state into a token mask.
 *
 * The automaton emits compact JSON only: no whitespace anywhere. That is a
 * choice, not a limit of the machine: every byte the model may spend on
 * layout is a byte a random-weight model can spend forever, and compact JSON
 * is still any JSON parser's input. */
#ifndef KIPP_GRAMMAR_INTERNAL_H
#define KIPP_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "kipp.h"

/* Bounds that make every document finite (docs/ARCHITECTURE.md). */
#define GRAM_MAX_CANDIDATES 64    /* enum values, object properties: one bit each */
#define GRAM_DEFAULT_MAX_STRING 256 /* characters, when the schema gives no maxLength */
#define GRAM_DEFAULT_MAX_ITEMS 64   /* when the schema gives no maxItems */
/* Unconstrained values (json_object, schema {} or true, undeclared
 * required properties) are where a model can wander longest: their
 * containers are kept small and shallow. */
#define GRAM_FREE_MAX_KEYS 8        /* keys of an object whose properties are not declared */
#define GRAM_FREE_KEY_LENGTH 32     /* characters of such a key */
#define GRAM_FREE_MAX_ITEMS 8       /* items of an array of unconstrained values */
#define GRAM_FREE_MAX_DEPTH 3       /* nested unconstrained objects/arrays */
#define GRAM_MAX_INT_DIGITS 15      /* JSON numbers stay exact as IEEE doubles */
#define GRAM_MAX_FRAC_DIGITS 9
#define GRAM_MAX_EXP_DIGITS 2
#define GRAM_MAX_LENGTH_BOUND 16384 /* largest minLength/maxLength/minItems/maxItems accepted */
#define GRAM_MAX_NODES 4096
#define GRAM_MAX_DEPTH 24           /* automaton stack frames per thread */
#define GRAM_MAX_THREADS 32         /* live anyOf alternatives */

typedef enum gram_kind {
    G_ANY,      /* any JSON value (bounded as above) */
    G_OBJECT,   /* declared properties (or free keys when n_props == 0 && free_keys) */
    G_ARRAY,
    G_STRING,
    G_NUMBER,
    G_INTEGER,
    G_LITERALS, /* one of a few byte strings: enum, const, true/false/null, fixed text */
    G_ANYOF,
    G_SEQ,      /* the kids one after another */
    G_REPEAT,   /* kid[0], then `items` repeated: min..max values in all (min >= 1) */
} gram_kind;

typedef struct gram_node {
    gram_kind kind;
    uint32_t min, max;      /* string characters, array items or repeats */
    uint32_t items;         /* G_ARRAY: node of every item; G_REPEAT: of every one
                             * after the first (which can carry a separator) */
    bool free_keys;         /* G_OBJECT: any keys (values G_ANY) */
    uint64_t required;      /* G_OBJECT: bit i = property i */
    uint32_t n;             /* properties, literals or kids */
    char **lit;             /* G_LITERALS: the bytes; G_OBJECT: quoted keys */
    uint32_t *lit_len;
    uint32_t *kid;          /* G_OBJECT: value node per property; G_ANYOF/G_SEQ: kids */
} gram_node;

typedef struct kipp_vocab_index kipp_vocab_index;

struct kipp_grammar {
    const kipp_model *model;
    const kipp_vocab_index *vocab;
    gram_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t root;
    /* shared nodes for unconstrained values */
    uint32_t any, free_object, free_array, free_string, free_key, number, literals_tfn;
    int32_t allowed_added[4]; /* added tokens the grammar may emit (tool-call tags) */
    uint32_t n_allowed_added;
    struct gram_cache *cache;  /* state -> allowed-token bitset */
};

/* Node building (grammar.c). Return the node index or UINT32_MAX (out of
 * memory / too many nodes; err filled). */
uint32_t kipp_gram_new(kipp_grammar *g, gram_kind kind, kipp_error *err);
int kipp_gram_add_literal(kipp_grammar *g, uint32_t node, const char *bytes, size_t n,
                          kipp_error *err);
int kipp_gram_add_kid(kipp_grammar *g, uint32_t node, uint32_t kid, kipp_error *err);
/* Allocates the grammar with its shared nodes; root unset. */
int kipp_gram_begin(const kipp_model *model, kipp_grammar **out, kipp_error *err);
/* Checks the depth bound and finishes; frees g on failure. */
int kipp_gram_finish(kipp_grammar *g, kipp_error *err);

/* Schema compiler (grammar_schema.c): the node for `schema`, resolving
 * $ref against `document`. Errors name the unsupported keyword. */
int kipp_gram_compile_schema(kipp_grammar *g, const json_value *document,
                             const json_value *schema, uint32_t *node, kipp_error *err);

/* Most calls one constrained answer may hold with parallel_tool_calls
 * (every document must be finite; a call is dozens of bytes at least). */
#define GRAM_MAX_TOOL_CALLS 16

/* A grammar whose documents are 1..max_calls Qwen3 tool calls, "\n"
 * between them (as the template renders an assistant's tool_calls):
 * "<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGS}\n</tool_call>"
 * where NAME is one of names[] and ARGS satisfies that function's
 * parameter schema (NULL = any object). max_calls is 1 ..
 * GRAM_MAX_TOOL_CALLS. */
int kipp_grammar_tool_call(const kipp_model *model, const char *const *names,
                           const json_value *const *parameters, size_t n, uint32_t max_calls,
                           kipp_grammar **out, kipp_error *err);
/* From a parsed schema (NULL = any JSON object). */
int kipp_grammar_from_json_value(const kipp_model *model, const json_value *schema,
                                 kipp_grammar **out, kipp_error *err);

#endif
