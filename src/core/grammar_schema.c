/* JSON Schema -> grammar nodes (grammar_internal.h).
 *
 * The subset: type (one or a list), properties, required,
 * additionalProperties (false, true or {}), items (one schema), enum, const,
 * anyOf, minItems/maxItems, minLength/maxLength, $defs/definitions with
 * local $ref ("#/$defs/NAME") that does not recurse, and the annotations
 * title, description, $schema, $id, $comment, examples, default. Any other
 * keyword is refused with its name: a constraint we silently ignored would
 * let the server return documents that fail the caller's own validator.
 *
 * What the automaton generates is a subset of what the schema accepts:
 * objects with declared properties get only those keys (in any order, each
 * at most once), even when additionalProperties allows more; strings and
 * arrays without an upper bound get the defaults in grammar_internal.h.
 * Every generated document still validates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/grammar_internal.h"

#define MAX_REF_DEPTH 32

typedef struct compiler {
    kipp_grammar *g;
    const json_value *document;
    const json_value *ref_stack[MAX_REF_DEPTH]; /* $ref targets being compiled (cycle check) */
    int n_refs;
    kipp_error *err;
} compiler;

static const char *const ANNOTATIONS[] = {"title", "description", "$schema", "$id",
                                          "$comment", "examples", "default", "$defs",
                                          "definitions"};
static const char *const KEYWORDS[] = {"type", "properties", "required", "additionalProperties",
                                       "items", "enum", "const", "anyOf", "minItems",
                                       "maxItems", "minLength", "maxLength", "$ref"};

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return true;
    return false;
}

static int unsupported(compiler *c, const char *what, const char *key) {
    return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "unsupported JSON Schema %s '%s'", what, key);
}

static bool value_has_type(const json_value *v, const char *type) {
    if (!type) return true;
    switch (v->type) {
    case JSON_NULL: return !strcmp(type, "null");
    case JSON_TRUE:
    case JSON_FALSE: return !strcmp(type, "boolean");
    case JSON_NUMBER:
        return !strcmp(type, "number") ||
               (!strcmp(type, "integer") && v->as.number.value == (double)(long long)v->as.number.value);
    case JSON_STRING: return !strcmp(type, "string");
    case JSON_ARRAY: return !strcmp(type, "array");
    case JSON_OBJECT: return !strcmp(type, "object");
    }
    return false;
}

static int get_bound(compiler *c, const json_value *s, const char *key, uint32_t *out) {
    const json_value *v = kipp_json_get(s, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64 ||
        v->as.number.integer < 0 || v->as.number.integer > GRAM_MAX_LENGTH_BOUND)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'%s' must be an integer in [0, %d]", key,
                         GRAM_MAX_LENGTH_BOUND);
    *out = (uint32_t)v->as.number.integer;
    return 0;
}

static int compile(compiler *c, const json_value *s, uint32_t *out);
static int compile_literals_tfn(compiler *c, const char *which, uint32_t *out);

/* enum / const: literal alternatives, filtered by `type` when given. */
static int compile_literals(compiler *c, const json_value *s, const char *type, uint32_t *out) {
    const json_value *en = kipp_json_get(s, "enum"), *cn = kipp_json_get(s, "const");
    for (size_t i = 0; i < s->as.object.count; i++) {
        const char *k = s->as.object.keys[i];
        if (in_list(k, KEYWORDS, sizeof KEYWORDS / sizeof *KEYWORDS) && strcmp(k, "enum") &&
            strcmp(k, "const") && strcmp(k, "type"))
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'%s' combined with '%s' is not supported",
                             en ? "enum" : "const", k);
    }
    if (en && en->type != JSON_ARRAY)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'enum' must be an array");
    uint32_t node = kipp_gram_new(c->g, G_LITERALS, c->err);
    if (node == UINT32_MAX) return c->err->code;
    size_t n = en ? en->as.array.count : 1;
    for (size_t i = 0; i < n; i++) {
        const json_value *v = en ? en->as.array.items[i] : cn;
        if (!value_has_type(v, type)) continue;
        json_buf b = {0};
        kipp_json_serialize(&b, v); /* the bytes the automaton emits for a literal */
        int rc = b.failed ? kipp_fail(c->err, KIPP_E_MEMORY, "out of memory")
                          : kipp_gram_add_literal(c->g, node, b.data, b.length, c->err);
        kipp_json_buf_free(&b);
        if (rc) return rc;
    }
    if (c->g->nodes[node].n == 0)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'%s' allows no value%s", en ? "enum" : "const",
                         type ? " of the given type" : "");
    *out = node;
    return 0;
}

static int compile_object(compiler *c, const json_value *s, uint32_t *out) {
    const json_value *props = kipp_json_get(s, "properties");
    const json_value *req = kipp_json_get(s, "required");
    const json_value *ap = kipp_json_get(s, "additionalProperties");
    if (props && props->type != JSON_OBJECT)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'properties' must be an object");
    if (req && req->type != JSON_ARRAY)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'required' must be an array");
    bool closed = false;
    if (ap) {
        if (ap->type == JSON_FALSE) closed = true;
        else if (!(ap->type == JSON_TRUE || (ap->type == JSON_OBJECT && ap->as.object.count == 0)))
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "unsupported JSON Schema keyword "
                             "'additionalProperties' with a schema (use false, true or {})");
    }
    size_t n_props = props ? props->as.object.count : 0;
    if (n_props == 0 && !closed && (!req || req->as.array.count == 0)) {
        *out = c->g->free_object; /* any keys: nothing is declared */
        return 0;
    }
    uint32_t node = kipp_gram_new(c->g, G_OBJECT, c->err);
    if (node == UINT32_MAX) return c->err->code;
    for (size_t i = 0; i < n_props; i++) {
        uint32_t kid;
        if (compile(c, props->as.object.values[i], &kid)) return c->err->code;
        json_buf b = {0};
        kipp_json_buf_append_string(&b, props->as.object.keys[i], props->as.object.key_lengths[i]);
        int rc = b.failed ? kipp_fail(c->err, KIPP_E_MEMORY, "out of memory")
                          : kipp_gram_add_literal(c->g, node, b.data, b.length, c->err);
        kipp_json_buf_free(&b);
        if (rc) return rc;
        c->g->nodes[node].kid[c->g->nodes[node].n - 1] = kid;
    }
    for (size_t i = 0; req && i < req->as.array.count; i++) {
        const json_value *r = req->as.array.items[i];
        if (r->type != JSON_STRING)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'required' must list strings");
        json_buf b = {0};
        kipp_json_buf_append_string(&b, r->as.string.chars, r->as.string.length);
        if (b.failed) return kipp_fail(c->err, KIPP_E_MEMORY, "out of memory");
        gram_node *nd = &c->g->nodes[node];
        uint32_t k = 0;
        while (k < nd->n && !(nd->lit_len[k] == b.length && !memcmp(nd->lit[k], b.data, b.length)))
            k++;
        int rc = 0;
        if (k == nd->n) {
            if (closed)
                rc = kipp_fail(c->err, KIPP_E_UNSUPPORTED, "required property '%s' is not in "
                               "'properties' and additionalProperties is false: no document "
                               "can satisfy the schema", r->as.string.chars);
            else if (!(rc = kipp_gram_add_literal(c->g, node, b.data, b.length, c->err)))
                c->g->nodes[node].kid[k] = c->g->any; /* required but undeclared: any value */
        }
        kipp_json_buf_free(&b);
        if (rc) return rc;
        c->g->nodes[node].required |= 1ull << k;
    }
    *out = node;
    return 0;
}

static int compile_typed(compiler *c, const json_value *s, const char *type, uint32_t *out) {
    kipp_grammar *g = c->g;
    if (kipp_json_get(s, "enum") || kipp_json_get(s, "const"))
        return compile_literals(c, s, type, out);
    if (!strcmp(type, "null")) return compile_literals_tfn(c, "null", out);
    if (!strcmp(type, "boolean")) return compile_literals_tfn(c, "bool", out);
    if (!strcmp(type, "integer") || !strcmp(type, "number")) {
        *out = kipp_gram_new(g, !strcmp(type, "integer") ? G_INTEGER : G_NUMBER, c->err);
        return *out == UINT32_MAX ? c->err->code : 0;
    }
    if (!strcmp(type, "string")) {
        uint32_t min = 0, max = UINT32_MAX;
        if (get_bound(c, s, "minLength", &min) || get_bound(c, s, "maxLength", &max))
            return c->err->code;
        if (max == UINT32_MAX) max = min > GRAM_DEFAULT_MAX_STRING ? min : GRAM_DEFAULT_MAX_STRING;
        if (min > max)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "minLength %u > maxLength %u", min, max);
        uint32_t node = kipp_gram_new(g, G_STRING, c->err);
        if (node == UINT32_MAX) return c->err->code;
        g->nodes[node].min = min;
        g->nodes[node].max = max;
        *out = node;
        return 0;
    }
    if (!strcmp(type, "array")) {
        const json_value *items = kipp_json_get(s, "items");
        uint32_t min = 0, max = UINT32_MAX, kid = g->any;
        if (get_bound(c, s, "minItems", &min) || get_bound(c, s, "maxItems", &max))
            return c->err->code;
        if (max == UINT32_MAX) max = min > GRAM_DEFAULT_MAX_ITEMS ? min : GRAM_DEFAULT_MAX_ITEMS;
        if (min > max)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "minItems %u > maxItems %u", min, max);
        if (items && items->type == JSON_ARRAY)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "unsupported JSON Schema keyword 'items' "
                             "as an array (tuple validation)");
        if (items && compile(c, items, &kid)) return c->err->code;
        uint32_t node = kipp_gram_new(g, G_ARRAY, c->err);
        if (node == UINT32_MAX) return c->err->code;
        g->nodes[node].min = min;
        g->nodes[node].max = max;
        g->nodes[node].items = kid;
        *out = node;
        return 0;
    }
    if (!strcmp(type, "object")) return compile_object(c, s, out);
    return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "unknown JSON Schema type '%s'", type);
}

/* ["true","false"] or ["null"] as their own literal node. */
static int compile_literals_tfn(compiler *c, const char *which, uint32_t *out) {
    uint32_t node = kipp_gram_new(c->g, G_LITERALS, c->err);
    if (node == UINT32_MAX) return c->err->code;
    if (!strcmp(which, "null")) {
        if (kipp_gram_add_literal(c->g, node, "null", 4, c->err)) return c->err->code;
    } else if (kipp_gram_add_literal(c->g, node, "true", 4, c->err) ||
               kipp_gram_add_literal(c->g, node, "false", 5, c->err)) {
        return c->err->code;
    }
    *out = node;
    return 0;
}

static const json_value *resolve_ref(compiler *c, const char *ref) {
    const char *name = NULL;
    const json_value *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) {
        name = ref + 8;
        defs = kipp_json_get(c->document, "$defs");
    } else if (!strncmp(ref, "#/definitions/", 14)) {
        name = ref + 14;
        defs = kipp_json_get(c->document, "definitions");
    } else if (!strcmp(ref, "#")) {
        return c->document;
    }
    if (!name || !defs || strchr(name, '/') || strchr(name, '~')) return NULL;
    return kipp_json_get(defs, name);
}

static int compile(compiler *c, const json_value *s, uint32_t *out) {
    if (s->type == JSON_TRUE) {
        *out = c->g->any;
        return 0;
    }
    if (s->type != JSON_OBJECT)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "a schema must be an object or true");
    for (size_t i = 0; i < s->as.object.count; i++) {
        const char *k = s->as.object.keys[i];
        if (!in_list(k, KEYWORDS, sizeof KEYWORDS / sizeof *KEYWORDS) &&
            !in_list(k, ANNOTATIONS, sizeof ANNOTATIONS / sizeof *ANNOTATIONS))
            return unsupported(c, "keyword", k);
    }
    const json_value *ref = kipp_json_get(s, "$ref");
    if (ref) {
        for (size_t i = 0; i < s->as.object.count; i++)
            if (in_list(s->as.object.keys[i], KEYWORDS, sizeof KEYWORDS / sizeof *KEYWORDS) &&
                strcmp(s->as.object.keys[i], "$ref"))
                return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'$ref' next to '%s' is not supported",
                                 s->as.object.keys[i]);
        const json_value *target =
            ref->type == JSON_STRING ? resolve_ref(c, ref->as.string.chars) : NULL;
        if (!target)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'$ref' %s does not name a local "
                             "#/$defs/ or #/definitions/ entry",
                             ref->type == JSON_STRING ? ref->as.string.chars : "(not a string)");
        for (int i = 0; i < c->n_refs; i++)
            if (c->ref_stack[i] == target)
                return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "recursive '$ref' %s is not supported",
                                 ref->as.string.chars);
        if (c->n_refs == MAX_REF_DEPTH)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'$ref' chain too deep");
        c->ref_stack[c->n_refs++] = target;
        int rc = compile(c, target, out);
        c->n_refs--;
        return rc;
    }
    const json_value *any = kipp_json_get(s, "anyOf");
    if (any) {
        if (any->type != JSON_ARRAY || any->as.array.count == 0)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'anyOf' must be a non-empty array");
        for (size_t i = 0; i < s->as.object.count; i++)
            if (in_list(s->as.object.keys[i], KEYWORDS, sizeof KEYWORDS / sizeof *KEYWORDS) &&
                strcmp(s->as.object.keys[i], "anyOf"))
                return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'anyOf' next to '%s' is not "
                                 "supported (move it into each alternative)",
                                 s->as.object.keys[i]);
        uint32_t node = kipp_gram_new(c->g, G_ANYOF, c->err);
        if (node == UINT32_MAX) return c->err->code;
        for (size_t i = 0; i < any->as.array.count; i++) {
            uint32_t kid;
            if (compile(c, any->as.array.items[i], &kid) || kipp_gram_add_kid(c->g, node, kid, c->err))
                return c->err->code;
        }
        *out = node;
        return 0;
    }
    const json_value *type = kipp_json_get(s, "type");
    if (!type) {
        if (kipp_json_get(s, "enum") || kipp_json_get(s, "const"))
            return compile_literals(c, s, NULL, out);
        /* untyped: the keywords present say which kind of value to make */
        const char *t = NULL;
        if (kipp_json_get(s, "properties") || kipp_json_get(s, "required") ||
            kipp_json_get(s, "additionalProperties"))
            t = "object";
        else if (kipp_json_get(s, "items") || kipp_json_get(s, "minItems") ||
                 kipp_json_get(s, "maxItems"))
            t = "array";
        else if (kipp_json_get(s, "minLength") || kipp_json_get(s, "maxLength"))
            t = "string";
        if (!t) {
            *out = c->g->any;
            return 0;
        }
        return compile_typed(c, s, t, out);
    }
    if (type->type == JSON_STRING) return compile_typed(c, s, type->as.string.chars, out);
    if (type->type != JSON_ARRAY || type->as.array.count == 0)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'type' must be a string or a non-empty array");
    uint32_t node = kipp_gram_new(c->g, G_ANYOF, c->err);
    if (node == UINT32_MAX) return c->err->code;
    for (size_t i = 0; i < type->as.array.count; i++) {
        const json_value *t = type->as.array.items[i];
        uint32_t kid;
        if (t->type != JSON_STRING)
            return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'type' must list strings");
        /* enum + a type list: each enum value lands in the branch of its type */
        if (compile_typed(c, s, t->as.string.chars, &kid)) {
            if ((kipp_json_get(s, "enum") || kipp_json_get(s, "const")) &&
                strstr(c->err->message, "allows no value")) {
                c->err->code = 0;
                continue;
            }
            return c->err->code;
        }
        if (kipp_gram_add_kid(c->g, node, kid, c->err)) return c->err->code;
    }
    if (c->g->nodes[node].n == 0)
        return kipp_fail(c->err, KIPP_E_UNSUPPORTED, "'enum' allows no value of the given types");
    *out = node;
    return 0;
}

int kipp_gram_compile_schema(kipp_grammar *g, const json_value *document, const json_value *schema,
                             uint32_t *node, kipp_error *err) {
    compiler c = {.g = g, .document = document, .err = err};
    return compile(&c, schema, node);
}
