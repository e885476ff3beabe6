/*
 * rest_http.c — one HTTP request to an MLflow tracking server, the way
 * MLflow's Python client makes it (mlflow_rest.h): the handle and what
 * every request carries, the transfer, and reading the reply.
 *
 * Why libcurl directly: the sink must ship from a thread of a training
 * process without signals (CURLOPT_NOSIGNAL), with connect/total timeouts
 * and a low-speed limit (a server that accepts and never answers must not
 * hold the shipping thread forever), and it must be abortable at stop
 * (CURLOPT_XFERINFOFUNCTION checks a flag and a deadline).
 *
 * Semantics copied from MLflow (mlflow/utils/rest_utils.py): endpoints are
 * <tracking uri>/api/2.0/mlflow/<name>, so a URI with a path prefix
 * (http://host/mlflow) works; redirects are followed as requests follows
 * them.
 *
 * The other jobs of the client have their own files: credentials
 * (rest_auth.c), TLS and proxy (rest_tls.c), the URI (rest_uri.c), what an
 * answer means (answer.c); the retry policy (rest_retry.c) sits above this
 * file and calls it, never the other way.  This file must never
 * retry (one call is one request, and one more only for a redirect to
 * https), never sleep, and never name the server in a message but by its
 * redacted form (r->shown) or libcurl's own text (host and port only).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rest_private.h"
#include "sink.h"

#define API_PREFIX "/api/2.0/mlflow/"
#define RESP_MAX (4u << 20) /* responses we read; MLflow's are small */

/* ---- process-wide init ---------------------------------------------------- */
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    /* never cleaned up: the sink may be in use until process exit; the TLS
     * module's libcurl is initialised when it loads (curl_api.c) */
    global_rc = sm__curl_builtin()->global_init(CURL_GLOBAL_DEFAULT);
}

int sm__rest_global_init(void)
{
    pthread_once(&global_once, global_init);
    return global_rc == CURLE_OK ? 0 : -EIO;
}

/* ---- curl callbacks --------------------------------------------------------- */
static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    sm_rest *r = ud;
    size_t n = size * nmemb;

    if (r->resp_len + n + 1 > r->resp_cap) {
        size_t cap = r->resp_cap ? r->resp_cap : 4096;
        char *p;
        while (cap < r->resp_len + n + 1)
            cap *= 2;
        if (cap > RESP_MAX)
            return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
        p = realloc(r->resp, cap);
        if (!p)
            return 0;
        r->resp = p;
        r->resp_cap = cap;
    }
    memcpy(r->resp + r->resp_len, data, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    sm_rest *r = ud;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";

    if (n > sizeof name - 1 && n < 256 && strncasecmp(data, name, sizeof name - 1) == 0) {
        char v[256];
        size_t vl = n - (sizeof name - 1);
        memcpy(v, data + sizeof name - 1, vl);
        v[vl] = '\0';
        r->retry_after = sm__rest_parse_retry_after(v, (long)time(NULL));
    } else if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        r->retry_after = -1; /* a new response (after a 1xx or a proxy's 200) */
    }
    return n;
}

/* sm__rest_set_cancel: this thread's hook (mlflow_rest.h) */
static _Thread_local int (*cancel_fn)(void *);
static _Thread_local void *cancel_arg;

void sm__rest_set_cancel(int (*fn)(void *arg), void *arg)
{
    cancel_fn = fn;
    cancel_arg = arg;
}

int sm__rest_cancel_asked(void)
{
    return cancel_fn && cancel_fn(cancel_arg);
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    sm_rest *r = ud;

    (void)dt;
    (void)ut;
    if (r->say_s > 0 && r->stalled && !r->said) {
        double now = sm__now_mono();
        if ((long long)(dn + un) != r->moved) {
            r->moved = (long long)(dn + un);
            r->moved_at = now;
        } else if (now - r->moved_at >= (double)r->say_s) {
            r->said = 1;
            r->stalled(r->stalled_arg, now - r->moved_at);
        }
    }
    if (r->abort_flag && atomic_load(r->abort_flag))
        return 1;
    if (sm__rest_cancel_asked())
        return 1;
    if (r->abort_deadline_ms) {
        long long d = atomic_load(r->abort_deadline_ms);
        if (d > 0 && sm__now_mono() * 1000.0 >= (double)d)
            return 1;
    }
    return 0;
}

/* ---- init / free ------------------------------------------------------------- */
static int env_headers(sm_rest *r, char *err, size_t errlen);

int sm__rest_init(sm_rest *r, const char *uri, char *err, size_t errlen)
{
    char *auth = NULL;
    int rc;

    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    rc = sm__rest_uri_check(r, uri, err, errlen);
    if (rc < 0)
        return rc;
    rc = sm__rest_tls_env(r, err, errlen);
    if (rc == -ENOMEM)
        goto nomem;
    if (rc < 0)
        return rc;

    r->connect_timeout_s = 10;
    r->total_timeout_s = 120; /* MLflow's MLFLOW_HTTP_REQUEST_TIMEOUT default */
    {
        /* the one number parser (number.h); a bad value is said once per
         * process (every request opens an sm_rest) and the default used */
        static atomic_flag said = ATOMIC_FLAG_INIT;
        const sm_num_spec spec = {"MLFLOW_HTTP_REQUEST_TIMEOUT", 1, 86400, 1, 1};
        double secs;

        if (sm__env_number(spec.name, &spec, &secs, "using the default 120 s", &said) > 0)
            r->total_timeout_s = (long)secs;
    }

    rc = sm__rest_global_init();
    if (rc < 0) {
        snprintf(err, errlen, "libcurl initialisation failed");
        goto fail;
    }
    r->c = sm__rest_tls_pick(r, err, errlen);
    if (!r->c) {
        rc = -ENOENT;
        goto fail;
    }
    rc = sm__rest_auth_header(&auth);
    if (rc < 0)
        goto nomem;
    r->h = r->c->easy_init();
    if (!r->h)
        goto nomem;
    {
        const sm_curl_api *c = r->c;
        struct curl_slist *l = c->slist_append(NULL, "Content-Type: application/json");
        struct curl_slist *l2 = l ? c->slist_append(l, "Expect:") : NULL; /* no 100-continue */
        struct curl_slist *l3 = l2 && auth ? c->slist_append(l2, auth) : l2;
        if (!l || !l2 || !l3) {
            c->slist_free_all(l2 ? l2 : l);
            goto nomem;
        }
        r->headers = l3;
        r->has_auth = auth != NULL;
    }
    sm__rest_free_secret(auth);
    auth = NULL;
    rc = env_headers(r, err, errlen);
    if (rc < 0)
        goto fail;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    rc = -ENOMEM;
fail:
    sm__rest_free_secret(auth);
    sm__rest_free(r);
    return rc;
}

static int header_text_ok(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            return 0;
    return 1;
}

int sm__rest_add_headers(sm_rest *r, const char *const *pairs, char *err, size_t errlen)
{
    for (size_t i = 0; pairs && pairs[i] && pairs[i + 1]; i += 2) {
        const char *name = pairs[i], *value = pairs[i + 1];
        struct curl_slist *l;
        char *line;
        size_t n;

        if (!*name || strpbrk(name, ": \t") || !header_text_ok(name) || !header_text_ok(value)) {
            /* the name is not a secret; the value may be */
            snprintf(err, errlen, "HTTP header %.80s: not a valid header name or value", name);
            return -EINVAL;
        }
        if (strcasecmp(name, "Authorization") == 0 && r->has_auth)
            continue; /* the environment's credentials win, as in MLflow */
        n = strlen(name) + strlen(value) + 3;
        line = malloc(n);
        if (!line) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        /* "Name;" is how libcurl sends a header with an empty value */
        if (*value)
            snprintf(line, n, "%s: %s", name, value);
        else
            snprintf(line, n, "%s;", name);
        l = r->c->slist_append(r->headers, line);
        sm__rest_free_secret(line);
        if (!l) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        r->headers = l;
    }
    return 0;
}

/* SCOPEMETER_HTTP_HEADERS: extra headers on every request this process
 * makes, a JSON object of names and string values ({"X-Gateway-Key": "…"};
 * docs/rest.md): what a proxy in front of MLflow asks of `scopemeter run`,
 * and how the companion gets the headers of the process it watches
 * (sm_monitor_set_headers, MLflow's request-header providers: companion.c,
 * the front).  Read with every handle, like the credentials; a value that is
 * not such an object is -EINVAL with one line, every request refused rather
 * than sent without what the user asked for. */
static int env_headers(sm_rest *r, char *err, size_t errlen)
{
    static const char name[] = "SCOPEMETER_HTTP_HEADERS";
    const char *v = sm__rest_env(name), *key;
    json_error_t je;
    json_t *o, *val;
    int rc = 0;

    if (!v)
        return 0;
    o = json_loads(v, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        /* not jansson's text: it quotes the input near the error, a secret */
        if (o)
            snprintf(err, errlen, "%s is not a JSON object of header names and values", name);
        else
            snprintf(err, errlen, "%s is not a JSON object of header names and values (invalid "
                     "JSON at character %d)", name, je.position);
        rc = -EINVAL;
        goto out;
    }
    json_object_foreach(o, key, val) {
        const char *pair[3] = {key, json_string_value(val), NULL};
        if (!pair[1] || strlen(pair[1]) != json_string_length(val)) {
            snprintf(err, errlen, "%s: the value of %.80s is not a string without NUL", name,
                     key);
            rc = -EINVAL;
            break;
        }
        rc = sm__rest_add_headers(r, pair, err, errlen);
        if (rc < 0)
            break;
    }
out:
    json_decref(o);
    return rc;
}

void sm__rest_free(sm_rest *r)
{
    if (r->h)
        r->c->easy_cleanup(r->h);
    r->h = NULL;
    sm__rest_free_headers(r->c, r->headers);
    r->headers = NULL;
    free(r->ca_path);
    free(r->client_cert);
    free(r->proxy);
    free(r->resp);
    r->ca_path = r->client_cert = r->proxy = r->resp = NULL;
    r->resp_len = r->resp_cap = 0;
}

int sm__rest_escape(sm_rest *r, const char *in, char *out, size_t outlen)
{
    char *e = r->c->easy_escape(r->h, in, 0);
    int rc = 0;

    if (!e)
        return -ENOMEM;
    if ((size_t)snprintf(out, outlen, "%s", e) >= outlen)
        rc = -ENOSPC;
    r->c->free(e);
    return rc;
}

/* ---- one request ------------------------------------------------------------ */
/* The options of one request: all set again after a reset, which keeps the
 * live connection and the TLS session cache. */
static void set_options(sm_rest *r, const char *url, int post, const char *body,
                        size_t body_len)
{
    const sm_curl_api *c = r->c;
    /* without TLS, a redirect to https fails as unsupported, and
     * sm__rest_once() goes on with the TLS module */
    const char *protocols = sm__curl_has_tls(c) ? "http,https" : "http";
    CURL *h = r->h;

    c->easy_reset(h);
    c->easy_setopt(h, CURLOPT_URL, url);
    c->easy_setopt(h, CURLOPT_PROTOCOLS_STR, protocols);
    c->easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, protocols);
    c->easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* a thread inside someone's process */
    c->easy_setopt(h, CURLOPT_HTTPHEADER, r->headers);
    c->easy_setopt(h, CURLOPT_USERAGENT, "scopemeter/" SM_VERSION);
    c->easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
    c->easy_setopt(h, CURLOPT_CONNECTTIMEOUT, r->connect_timeout_s);
    c->easy_setopt(h, CURLOPT_TIMEOUT, r->total_timeout_s);
    if (r->abort_deadline_ms && atomic_load(r->abort_deadline_ms) > 0) {
        /* a deadline known now is libcurl's own timer (exact); one set while
         * the request is in flight is seen by on_progress (within ~1 s) */
        long long left = atomic_load(r->abort_deadline_ms) - (long long)(sm__now_mono() * 1000.0);
        if (left < r->total_timeout_s * 1000LL)
            c->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
    }
    /* a server that accepted and stalls: under 1 byte/s for 10 s is an outage
     * (said while the job runs); MLflow answers a log-batch in milliseconds.
     * The delivery policy says it after say_s and waits for the answer up to
     * the total timeout instead (deliver.c, "Patience") */
    if (r->stall_s >= 0) {
        c->easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        c->easy_setopt(h, CURLOPT_LOW_SPEED_TIME, r->stall_s > 0 ? r->stall_s : 10L);
    }
    r->moved = 0;
    r->moved_at = sm__now_mono();
    r->said = 0;
    c->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    c->easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    c->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    c->easy_setopt(h, CURLOPT_WRITEDATA, r);
    c->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    c->easy_setopt(h, CURLOPT_HEADERDATA, r);
    c->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    c->easy_setopt(h, CURLOPT_XFERINFODATA, r);
    /* requests follows redirects, keeping the method for 307/308 only;
     * libcurl's POSTREDIR default matches (301/302/303 become GET). */
    c->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    c->easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    sm__rest_tls_setopt(r);
    if (post) {
        c->easy_setopt(h, CURLOPT_POST, 1L);
        c->easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        c->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else {
        c->easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
}

/* A transfer that got no answer: whether another try can help (a
 * connection error, yes; a certificate or URL problem, no) and one line
 * saying what happened.  Returns the outcome. */
static int transfer_failed(sm_rest *r, CURLcode cc, const char *ep, sm_rest_result *res)
{
    /* curl's messages name host and port, never the userinfo or headers */
    res->outcome = SM_REST_RETRY;
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_TOO_MANY_REDIRECTS:
        /* configuration problems: retrying cannot fix them */
        res->outcome = SM_REST_REFUSED;
        break;
    case CURLE_SSL_CONNECT_ERROR:
        /* https:// to a plain-http port: OpenSSL reads the HTTP answer
         * as a TLS record ("wrong version number"); no retry fixes it */
        if (strstr(r->errbuf, "wrong version number") || strstr(r->errbuf, "packet length")) {
            res->outcome = SM_REST_REFUSED;
            snprintf(res->msg, sizeof res->msg, "%s on %.200s: TLS handshake failed (%.120s): "
                     "the server answers plain HTTP there? (use http://)", ep, r->shown,
                     r->errbuf);
            return res->outcome;
        }
        break;
    default:
        break;
    }
    if (cc == CURLE_WRITE_ERROR) /* on_body refused it: over RESP_MAX (or no memory) */
        snprintf(res->msg, sizeof res->msg, "%s on %.200s: reply not read: larger than "
                 "%u MiB (or out of memory)", ep, r->shown, RESP_MAX >> 20);
    else {
        /* the system's word for it ("Connection refused", "No route to
         * host"), which libcurl's text ("Couldn't connect to server")
         * leaves out */
        long os_errno = 0;
        char why[80] = "";
        r->c->easy_getinfo(r->h, CURLINFO_OS_ERRNO, &os_errno);
        /* a connection closed without a reply is a reset to the caller */
        res->os_errno = os_errno > 0 ? (int)os_errno : cc == CURLE_GOT_NOTHING ? ECONNRESET : 0;
        if (os_errno > 0 && !strstr(r->errbuf, strerror((int)os_errno)))
            snprintf(why, sizeof why, " (%s)", strerror((int)os_errno));
        snprintf(res->msg, sizeof res->msg, "%s on %.200s: %.200s", ep, r->shown,
                 r->errbuf[0] ? r->errbuf : r->c->easy_strerror(cc));
        if (why[0]) {
            size_t used = strlen(res->msg);
            snprintf(res->msg + used, sizeof res->msg - used, "%s", why);
        }
    }
    return res->outcome;
}

int sm__rest_once(sm_rest *r, const char *method, const char *endpoint, const char *body,
                 size_t body_len, sm_rest_result *res)
{
    char url[sizeof r->base + 512], ep[96];
    CURLcode cc;
    long http = 0;
    int post = strcmp(method, "POST") == 0;

    memset(res, 0, sizeof *res);
    res->retry_after = -1;
    snprintf(ep, sizeof ep, "%.*s", (int)strcspn(endpoint, "?"), endpoint);
    if ((size_t)snprintf(url, sizeof url, "%s%s%s", r->base, API_PREFIX, endpoint) >=
        sizeof url) {
        res->outcome = SM_REST_FAILED;
        snprintf(res->msg, sizeof res->msg, "%s: request URL too long", ep);
        return res->outcome;
    }
    r->resp_len = 0;
    if (r->resp)
        r->resp[0] = '\0';
    r->retry_after = -1;
    r->errbuf[0] = '\0';

    set_options(r, url, post, body, body_len);
    cc = r->c->easy_perform(r->h);
    if (cc == CURLE_UNSUPPORTED_PROTOCOL && sm__rest_use_tls(r) == 0) {
        /* an http:// server that redirects to https: again with TLS */
        set_options(r, url, post, body, body_len);
        cc = r->c->easy_perform(r->h);
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        res->outcome = SM_REST_ABORTED;
        snprintf(res->msg, sizeof res->msg, "%s: aborted at stop", ep);
        return res->outcome;
    }
    if (cc != CURLE_OK) {
        res->timed_out = cc == CURLE_OPERATION_TIMEDOUT;
        return transfer_failed(r, cc, ep, res);
    }
    r->c->easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &http);
    res->retry_after = r->retry_after;
    sm__rest_parse_reply(endpoint, http, r->resp, r->resp_len, res);
    return res->outcome;
}
