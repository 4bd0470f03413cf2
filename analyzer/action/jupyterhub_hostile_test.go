package action_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
)

// maxErrBytes bounds an actuator's error, which goes to the log and the
// audit whatever a pod's annotations or the Hub's answers hold.
const maxErrBytes = 1200

// checkSafeErr fails unless err is one bounded line of printable UTF-8.
func checkSafeErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if len(msg) > maxErrBytes {
		t.Errorf("error of %d bytes, over %d: %.300s…", len(msg), maxErrBytes, msg)
	}
	if !utf8.ValidString(msg) {
		t.Errorf("error is not UTF-8: %q", msg)
	}
	for _, r := range msg {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			t.Errorf("error holds the control character %U: %q", r, msg)
			break
		}
	}
}

// TestJupyterHubHostileAnnotations: pods in a user's own namespace carry
// KubeSpawner's annotations with names chosen to fool the actuator (other
// users, names the Hub cannot hold, control characters, path tricks,
// look-alike Unicode, users that do not exist). Against the real Hub each
// is a pod no Hub server runs in: skipped with a bounded, printable note,
// no server stopped, nothing evicted. A real notebook pod with a hostile
// annotation is still found by the Hub's record, and only its server stops.
func TestJupyterHubHostileAnnotations(t *testing.T) {
	t.Parallel()
	hub := actiontest.StartHub(t, "jhub")
	hub.Start("alice", "")
	hub.Start("bob", "")
	hub.Start("bob", "lab")
	long := strings.Repeat("a", 10<<10)
	cases := []struct{ name, user, server string }{
		{"the victim", "bob", ""},
		{"the victim's named server", "bob", "lab"},
		{"another victim", "alice", ""},
		{"10 KB user", long, ""},
		{"10 KB server", "bob", long},
		{"256 characters", strings.Repeat("b", 256), ""},
		{"255 four-byte characters", strings.Repeat("𝔟", 255), ""},
		{"1021 bytes", strings.Repeat("𝔟", 255) + "b", ""},
		{"newline", "bob\nalice", ""},
		{"trailing newline", "bob\n", ""},
		{"carriage return", "bob\r", ""},
		{"tab", "\tbob", ""},
		{"NUL", "bob\x00", ""},
		{"clear screen", "\x1b[2Jbob", ""},
		{"terminal title", "bob\x1b]0;pwned\x07", ""},
		{"DEL", "bob\x7f", ""},
		{"C1 next line", "bob\u0085", ""},
		{"dot-dot", "..", ""},
		{"dot", ".", ""},
		{"dot-dot slash", "../bob", ""},
		{"slash", "bob/server", ""},
		{"climb to another user", "alice/../bob", ""},
		{"encoded slash", "%2F", ""},
		{"encoded slash in name", "bob%2Flab", ""},
		{"encoded climb", "..%2F..%2Fadmin", ""},
		{"encoded dots", "%2e%2e", ""},
		{"double encoded", "bob%252Flab", ""},
		{"query", "bob?include_stopped_servers=1", ""},
		{"fragment", "bob#lab", ""},
		{"leading space", " bob", ""},
		{"trailing space", "bob ", ""},
		{"server dot-dot", "bob", "../../alice/server"},
		{"bidi override", "\u202ebob", ""},
		{"zero-width space", "b\u200bob", ""},
		{"byte order mark", "bob\ufeff", ""},
		{"Cyrillic look-alike", "Ьob", ""},
		{"full-width", "ｂｏｂ", ""},
		{"combining accent", "bo\u0301b", ""},
		{"invalid UTF-8", "bob\xff\xfe", ""},
		{"overlong slash", "bob\xc0\xaf", ""},
		{"emoji", "🙂", ""},
		{"no such user", "nobody", ""},
		{"admin", "admin", ""},
		{"root", "root", ""},
		{"upper case", "BOB", ""},
	}
	var objs []runtime.Object
	for i, c := range cases {
		objs = append(objs, hubPod("mallory", fmt.Sprintf("notebook-%d", i), c.user, c.server))
	}
	objs = append(objs, hubPod("jhub", "jupyter-bob--lab", "../alice", "\x1b[2J"))
	client := fake.NewClientset(objs...)
	j := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()},
		Next: &kube.Reclaim{Core: client.CoreV1(), Apps: client.AppsV1(), Mode: "evict"}}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := j.Act(context.Background(), idleReqIn("mallory", fmt.Sprintf("notebook-%d", i)))
			t.Log(err)
			if !errors.Is(err, action.ErrUnsupported) || !strings.Contains(err.Error(), "no JupyterHub server runs in pod mallory/") {
				t.Errorf("got %v, want skipped: no Hub server runs in the pod", err)
			}
			checkSafeErr(t, err)
		})
	}
	if !hub.Running("alice", "") || !hub.Running("bob", "") || !hub.Running("bob", "lab") || len(kubetest.Evictions(client)) != 0 {
		t.Fatalf("after the hostile pods: alice %v, bob %v, bob's lab %v (want all running), evictions %v (want none)",
			hub.Running("alice", ""), hub.Running("bob", ""), hub.Running("bob", "lab"), kubetest.Evictions(client))
	}
	d, err := j.Act(context.Background(), idleReq("jupyter-bob--lab"))
	if err != nil || !strings.Contains(d, `server "lab" of "bob"`) || hub.Running("bob", "lab") || !hub.Running("bob", "") || !hub.Running("alice", "") {
		t.Errorf("bob's lab pod annotated ../alice: %q %v, want bob's lab stopped and no other server", d, err)
	}
}

// hubAnswers is a Hub that answers as a case says: user for GET
// /hub/api/users/alice, list for the user list, del for a DELETE.
type hubAnswers struct {
	user, list, del http.HandlerFunc
}

func jsonAnswer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// Pieces of the Hub's JSON.
const (
	alicePodState = `{"pod_name":"jupyter-alice","namespace":"jhub","dns_name":"jupyter-alice.jhub.svc.cluster.local"}`
	emptyPage     = `{"items":[],"_pagination":{"offset":0,"limit":200,"total":0,"next":null}}`
)

func serverJSON(state string) string {
	return `{"name":"","ready":true,"pending":null,"stopped":false,"url":"/user/x/","state":` + state + `}`
}

func userJSON(name string, servers string) string {
	n, _ := json.Marshal(name)
	return fmt.Sprintf(`{"kind":"user","name":%s,"admin":false,"servers":%s}`, n, servers)
}

func pageJSON(next string, users ...string) string {
	return fmt.Sprintf(`{"items":[%s],"_pagination":{"offset":0,"limit":200,"total":1,"next":%s}}`, strings.Join(users, ","), next)
}

// TestJupyterHubHostileAnswers: a Hub (or whatever answers at its URL)
// that sends huge, garbled, redirected, withheld or contradictory answers.
// Each is a clear failure or a skip, never a DELETE, and the error is one
// bounded printable line; only answers that truly name the pod stop its
// server, at the path the Hub's record gives.
func TestJupyterHubHostileAnswers(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("hub-token-for-hostile-answers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(other.Close)
	ok := jsonAnswer(http.StatusOK, userJSON("alice", `{"":`+serverJSON(alicePodState)+`}`))
	notFound := jsonAnswer(http.StatusNotFound, `{"status":404,"message":"Not Found"}`)
	huge := jsonAnswer(http.StatusOK, `{"name":"alice","servers":{},"x":"`+strings.Repeat("x", 5<<20)+`"}`)
	redirect := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL+r.URL.RequestURI(), code) }
	}
	endless := func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		fmt.Fprintf(w, `{"items":[],"_pagination":{"offset":%d,"limit":200,"total":999999,"next":{"offset":%d,"limit":200,"url":"%s"}}}`, off, off+200, other.URL)
	}
	// twoPages points its next page elsewhere; only its offset is used.
	twoPages := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("offset") == "0" {
			fmt.Fprintf(w, `{"items":[],"_pagination":{"offset":0,"limit":200,"total":201,"next":{"offset":200,"limit":200,"url":"%s/steal"}}}`, other.URL)
			return
		}
		_, _ = w.Write([]byte(pageJSON("null", userJSON("carol", `{"":`+serverJSON(`{"pod_name":"jupyter-carol","namespace":"jhub"}`)+`}`))))
	}
	const (
		fail = iota // an error that is not a skip
		skip        // action.Moot
		stop        // stopped through the Hub
	)
	cases := []struct {
		name   string
		hub    hubAnswers
		want   int
		detail string // in the error (or the detail, for stop)
		path   string // the one DELETE, for stop
	}{
		{"record names the pod", hubAnswers{user: ok}, stop, `server of "alice"`, "/hub/api/users/alice/server"},
		{"record names the pod for a named server", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"lab":`+serverJSON(alicePodState)+`}`))},
			stop, `server "lab" of "alice"`, "/hub/api/users/alice/servers/lab"},
		{"another user's record names the pod", hubAnswers{user: notFound, list: jsonAnswer(200, pageJSON("null",
			userJSON("carol", `{"":`+serverJSON(`{"pod_name":"x","namespace":"jhub"}`)+`}`),
			userJSON("dave", `{"":`+serverJSON(alicePodState)+`}`)))}, stop, `server of "dave"`, "/hub/api/users/dave/server"},
		{"user record over 4 MiB", hubAnswers{user: huge}, fail, "over 4194304 bytes", ""},
		{"user record not JSON", hubAnswers{user: jsonAnswer(200, "this is not JSON {{{")}, fail, "not a user", ""},
		{"user record an HTML page", hubAnswers{user: jsonAnswer(200, "<html><body>Sign in\n<script>x</script></body></html>")}, fail, "not a user", ""},
		{"user record an array", hubAnswers{user: jsonAnswer(200, `[{"name":"alice"}]`)}, fail, "not a user", ""},
		{"servers a string", hubAnswers{user: jsonAnswer(200, `{"name":"alice","servers":"jupyter-alice"}`)}, fail, "not a user", ""},
		{"servers withheld", hubAnswers{user: jsonAnswer(200, `{"name":"alice"}`)}, fail, "read:servers", ""},
		{"state withheld", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":{"name":"","ready":true,"pending":null}}`))}, fail, "admin:server_state", ""},
		{"state withheld in the list", hubAnswers{user: notFound, list: jsonAnswer(200, pageJSON("null",
			userJSON("carol", `{"":{"ready":true}}`)))}, fail, "admin:server_state", ""},
		{"state null", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON("null")+`}`))}, skip, "no JupyterHub server runs", ""},
		{"state a string", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`"jhub/jupyter-alice"`)+`}`))}, skip, "no JupyterHub server runs", ""},
		{"state names another namespace", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`{"pod_name":"jupyter-alice","namespace":"other"}`)+`}`))},
			skip, "whose servers run elsewhere", ""},
		{"state names another pod", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`{"pod_name":"jupyter-alice2","namespace":"jhub"}`)+`}`))},
			skip, "no JupyterHub server runs", ""},
		{"state without a namespace", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`{"pod_name":"jupyter-alice"}`)+`}`))},
			skip, "no JupyterHub server runs", ""},
		{"state pod_name a number", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`{"pod_name":7,"namespace":"jhub"}`)+`}`))},
			skip, "no JupyterHub server runs", ""},
		{"state names the pod with a case change", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(`{"pod_name":"Jupyter-Alice","namespace":"jhub"}`)+`}`))},
			skip, "no JupyterHub server runs", ""},
		{"two servers name the pod", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"":`+serverJSON(alicePodState)+`,"lab":`+serverJSON(alicePodState)+`}`))},
			fail, "two servers", ""},
		{"record's user name 10 KB", hubAnswers{user: jsonAnswer(200, userJSON(strings.Repeat("m", 10<<10), `{"":`+serverJSON(alicePodState)+`}`))},
			fail, "bytes", ""},
		{"record's user name with an escape", hubAnswers{user: jsonAnswer(200, userJSON("alice\x1b[2J", `{"":`+serverJSON(alicePodState)+`}`))},
			fail, "control character", ""},
		{"record's user name dot-dot", hubAnswers{user: jsonAnswer(200, userJSON("..", `{"":`+serverJSON(alicePodState)+`}`))}, fail, "path segment", ""},
		{"record's user name empty", hubAnswers{user: jsonAnswer(200, userJSON("", `{"":`+serverJSON(alicePodState)+`}`))}, fail, "empty", ""},
		{"record's server name climbs", hubAnswers{user: jsonAnswer(200, userJSON("alice", `{"../../bob/server":`+serverJSON(alicePodState)+`}`))},
			fail, "slash", ""},
		{"record says stopped", hubAnswers{user: jsonAnswer(200, userJSON("alice",
			`{"":{"ready":false,"pending":null,"stopped":true,"state":`+alicePodState+`}}`))}, skip, "already stopped", ""},
		{"record says stopping", hubAnswers{user: jsonAnswer(200, userJSON("alice",
			`{"":{"ready":false,"pending":"stop","stopped":false,"state":`+alicePodState+`}}`))}, skip, "already stopped", ""},
		{"user 500 with a page", hubAnswers{user: jsonAnswer(500, "<html>\n<h1>Internal Server Error</h1>\x1b[31m</html>")}, fail, "answered 500", ""},
		{"user 301", hubAnswers{user: redirect(http.StatusMovedPermanently)}, fail, "redirect (301)", ""},
		{"user 307", hubAnswers{user: redirect(http.StatusTemporaryRedirect)}, fail, "redirect (307)", ""},
		{"user 401", hubAnswers{user: jsonAnswer(401, `{}`)}, fail, "refused the token (401)", ""},
		{"list 403", hubAnswers{user: notFound, list: jsonAnswer(403, `{}`)}, fail, "list:users, read:servers, admin:server_state", ""},
		{"list not paginated", hubAnswers{user: notFound, list: jsonAnswer(200, `[`+userJSON("dave", `{"":`+serverJSON(alicePodState)+`}`)+`]`)},
			fail, "not a page", ""},
		{"list without _pagination", hubAnswers{user: notFound, list: jsonAnswer(200, `{"items":[]}`)}, fail, "no _pagination", ""},
		{"list over 4 MiB", hubAnswers{user: notFound, list: huge}, fail, "over 4194304 bytes", ""},
		{"list garbage", hubAnswers{user: notFound, list: jsonAnswer(200, "\x00\x01garbage")}, fail, "not a page", ""},
		{"list items garbage", hubAnswers{user: notFound, list: jsonAnswer(200, `{"items":[1,2,3],"_pagination":{"next":null}}`)}, fail, "not a page", ""},
		{"list next does not advance", hubAnswers{user: notFound, list: jsonAnswer(200, pageJSON(`{"offset":0}`))}, fail, "pages back", ""},
		{"list next goes back", hubAnswers{user: notFound, list: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("offset") == "0" {
				_, _ = w.Write([]byte(pageJSON(`{"offset":200}`)))
				return
			}
			_, _ = w.Write([]byte(pageJSON(`{"offset":100}`)))
		}}, fail, "pages back", ""},
		{"list endless, next URL elsewhere", hubAnswers{user: notFound, list: endless}, fail, "more than 20000 users", ""},
		{"list next URL elsewhere", hubAnswers{user: notFound, list: twoPages}, skip, "records of the 1 users", ""},
		{"DELETE 500", hubAnswers{user: ok, del: jsonAnswer(500, "boom\nboom")}, fail, "answered 500", "/hub/api/users/alice/server"},
		{"DELETE 400", hubAnswers{user: ok, del: jsonAnswer(400, `{"message":"not running"}`)}, fail, "answered 400", "/hub/api/users/alice/server"},
		{"DELETE 307", hubAnswers{user: ok, del: redirect(http.StatusTemporaryRedirect)}, fail, "redirect (307)", "/hub/api/users/alice/server"},
		{"DELETE 308", hubAnswers{user: ok, del: redirect(http.StatusPermanentRedirect)}, fail, "redirect (308)", "/hub/api/users/alice/server"},
		{"slow Hub", hubAnswers{user: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}}, fail, "unreachable", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var deletes []string
			var lists atomic.Int32
			h := c.hub
			if h.user == nil {
				h.user = notFound
			}
			if h.list == nil {
				h.list = jsonAnswer(http.StatusOK, emptyPage)
			}
			if h.del == nil {
				h.del = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
			}
			j := hostileHubActuator(t, tokenFile, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodDelete:
					deletes = append(deletes, r.URL.EscapedPath())
					h.del(w, r)
				case r.URL.Path == "/hub/api/users":
					lists.Add(1)
					h.list(w, r)
				default:
					h.user(w, r)
				}
			})
			if c.name == "slow Hub" { // the client gives up after 300 ms
				j.Client = &http.Client{Timeout: 300 * time.Millisecond}
			}
			d, err := j.Act(context.Background(), idleReq("jupyter-alice"))
			checkSafeErr(t, err)
			t.Log(d, err)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			switch {
			case c.want == stop && (err != nil || !strings.Contains(d, c.detail)):
				t.Errorf("got %q %v, want a stop naming %s", d, err, c.detail)
			case c.want == skip && (!action.Moot(err) || !strings.Contains(msg, c.detail)):
				t.Errorf("got %v, want a skip naming %q", err, c.detail)
			case c.want == fail && (err == nil || action.Moot(err) || !strings.Contains(msg, c.detail)):
				t.Errorf("got %q %v, want a failure naming %q", d, err, c.detail)
			}
			if c.path == "" && len(deletes) != 0 || c.path != "" && (len(deletes) != 1 || deletes[0] != c.path) {
				t.Errorf("DELETEs %q, want %q", deletes, c.path)
			}
			if n := lists.Load(); n > 100 {
				t.Errorf("%d pages of users read, over the bound", n)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d requests went where the Hub's answers pointed", n)
	}
}
