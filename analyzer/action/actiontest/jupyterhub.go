// Package actiontest helps tests of the actuators: a real JupyterHub
// (StartHub) and a URL nobody listens on (ClosedURL).
package actiontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// Hub is a real JupyterHub (Debian's jupyterhub, the proxy from npm's
// configurable-http-proxy) on loopback, with the dummy authenticator, named
// servers, and a spawner that runs a small local HTTP server per user and
// keeps KubeSpawner's state of the pod it would have made.
type Hub struct {
	// URL of the Hub API (http://127.0.0.1:PORT); the API is under /hub/api.
	URL string
	// Namespace is where the spawner's state says its pods run.
	Namespace string
	// TokenFile holds the gpuwatch service's token, with the scopes the
	// docs ask for (hubScopes).
	TokenFile string
	// NoStateTokenFile holds a token with the same scopes but
	// admin:server_state, as a Hub set up for gpuwatch before it read the
	// servers' state has.
	NoStateTokenFile string
	token            string
	t                testing.TB
}

// hubScopes are the scopes docs/configuration.md asks of gpuwatch's token.
const hubScopes = `'list:users', 'read:servers', 'admin:server_state', 'servers'`

// proxyPaths are where scripts/test.sh puts configurable-http-proxy.
var proxyPaths = []string{"/opt/configurable-http-proxy/bin/configurable-http-proxy"}

// hubConfig's TestSpawner stands in for KubeSpawner's persisted state:
// KubeSpawner's get_state() records the pod it made (pod_name, namespace,
// dns_name) and load_state() restores them, and the Hub shows that state
// to a token with admin:server_state. There is no KubeSpawner here (it is
// not packaged); this spawner starts a local process instead of a pod and
// records the pod KubeSpawner's default template names,
// jupyter-{username}[--{servername}], in the test's namespace. The Hub,
// its API, scopes and database are JupyterHub's own.
const hubConfig = `
import sys
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode, default

class TestSpawner(LocalProcessSpawner):
    """Runs the user's server as this process's user (the test users have
    no accounts) and keeps KubeSpawner's state of the pod."""
    namespace = Unicode(config=True)
    pod_name = Unicode()
    dns_name = Unicode()

    @default('pod_name')
    def _default_pod_name(self):
        return 'jupyter-' + self.user.name + ('--' + self.name if self.name else '')

    @default('dns_name')
    def _default_dns_name(self):
        return self.pod_name + '.' + self.namespace + '.svc.cluster.local'

    def make_preexec_fn(self, name):
        return None

    def user_env(self, env):
        return env

    def get_state(self):
        state = super().get_state()
        state['pod_name'] = self.pod_name
        state['namespace'] = self.namespace
        state['dns_name'] = self.dns_name
        return state

    def load_state(self, state):
        super().load_state(state)
        for key in ('pod_name', 'namespace', 'dns_name'):
            if key in state:
                setattr(self, key, state[key])

c.JupyterHub.ip = '127.0.0.1'
c.JupyterHub.port = %d
c.JupyterHub.hub_ip = '127.0.0.1'
c.JupyterHub.hub_port = %d
c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:%d'
c.ConfigurableHTTPProxy.command = [%q]
c.ConfigurableHTTPProxy.pid_file = %q
c.JupyterHub.db_url = 'sqlite:///%s'
c.JupyterHub.cookie_secret_file = %q
c.JupyterHub.pid_file = %q
c.JupyterHub.authenticator_class = 'dummy'
c.Authenticator.allowed_users = {'alice', 'bob', 'carol', 'dave', 'erin', 'mallory'}
c.JupyterHub.allow_named_servers = True
c.JupyterHub.spawner_class = TestSpawner
c.TestSpawner.namespace = %q
c.Spawner.cmd = [sys.executable, %q]
c.Spawner.args = []
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.JupyterHub.services = [{'name': 'gpuwatch', 'api_token': %q}, {'name': 'gpuwatch-nostate', 'api_token': %q}]
c.JupyterHub.load_roles = [
    {'name': 'gpuwatch', 'scopes': [` + hubScopes + `], 'services': ['gpuwatch']},
    {'name': 'gpuwatch-nostate', 'scopes': ['list:users', 'read:users', 'read:servers', 'servers'], 'services': ['gpuwatch-nostate']},
]
`

// singleUser is the users' server: it answers every path, as the Hub
// checks that the server is up.
const singleUser = `
import os, urllib.parse, http.server
u = urllib.parse.urlparse(os.environ['JUPYTERHUB_SERVICE_URL'])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')
    def log_message(self, *a):
        pass
http.server.HTTPServer((u.hostname or '127.0.0.1', u.port), H).serve_forever()
`

// StartHub starts the Hub, whose spawner's state says its pods run in
// namespace, and stops it when the test ends.
func StartHub(t testing.TB, namespace string) *Hub {
	t.Helper()
	hubBin := testtool.Need(t, "jupyterhub")
	proxy := testtool.Need(t, "configurable-http-proxy", proxyPaths...)
	dir := t.TempDir()
	token := fmt.Sprintf("gpuwatch-test-%d", time.Now().UnixNano())
	tokenFile, noStateFile := filepath.Join(dir, "token"), filepath.Join(dir, "token-nostate")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noStateFile, []byte(token+"-nostate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "singleuser.py")
	if err := os.WriteFile(server, []byte(singleUser), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, hub, api := testtool.FreePort(t), testtool.FreePort(t), testtool.FreePort(t)
	cfg := fmt.Sprintf(hubConfig, pub, hub, api, proxy, filepath.Join(dir, "proxy.pid"), filepath.Join(dir, "hub.sqlite"),
		filepath.Join(dir, "cookie_secret"), filepath.Join(dir, "hub.pid"), namespace, server, token, token+"-nostate")
	cfgFile := filepath.Join(dir, "jupyterhub_config.py")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "hub.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(hubBin, "-f", cfgFile)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Hub{URL: fmt.Sprintf("http://127.0.0.1:%d", hub), Namespace: namespace, TokenFile: tokenFile, NoStateTokenFile: noStateFile,
		token: token, t: t}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("hub log:\n%s", tail(b))
		}
	})
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		if code, _ := h.do("GET", "/hub/api/users", nil); code == http.StatusOK {
			return h
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("JupyterHub not up:\n%s", tail(b))
		}
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (h *Hub) do(method, path string, body any) (int, []byte) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+h.token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func serverPath(user, server string) string {
	if server == "" {
		return "/hub/api/users/" + user + "/server"
	}
	return "/hub/api/users/" + user + "/servers/" + server
}

// Start starts a user's server (named when server is not empty) and waits
// until it runs.
func (h *Hub) Start(user, server string) {
	h.t.Helper()
	if code, b := h.do("POST", serverPath(user, server), nil); code != http.StatusCreated && code != http.StatusAccepted {
		h.t.Fatalf("start %s/%s: %d %s", user, server, code, b)
	}
	for deadline := time.Now().Add(60 * time.Second); !h.Running(user, server); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("server %s/%s never became ready", user, server)
		}
	}
}

// Stop stops a server directly, as its user would.
func (h *Hub) Stop(user, server string) {
	h.t.Helper()
	if code, b := h.do("DELETE", serverPath(user, server), nil); code != http.StatusNoContent && code != http.StatusAccepted {
		h.t.Fatalf("stop %s/%s: %d %s", user, server, code, b)
	}
	for deadline := time.Now().Add(30 * time.Second); h.Running(user, server); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("server %s/%s still running", user, server)
		}
	}
}

// Running reports whether the Hub runs the server.
func (h *Hub) Running(user, server string) bool {
	h.t.Helper()
	code, b := h.do("GET", "/hub/api/users/"+user, nil)
	if code != http.StatusOK {
		h.t.Fatalf("get user %s: %d %s", user, code, b)
	}
	var u struct {
		Servers map[string]struct {
			Ready bool `json:"ready"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		h.t.Fatal(err)
	}
	s, ok := u.Servers[server]
	return ok && s.Ready
}

// PodOf returns the pod the Hub's record of a server names (its spawner's
// state, as KubeSpawner persists it), read through the API.
func (h *Hub) PodOf(user, server string) (namespace, pod string) {
	h.t.Helper()
	code, b := h.do("GET", "/hub/api/users/"+user+"?include_stopped_servers=1", nil)
	if code != http.StatusOK {
		h.t.Fatalf("get user %s: %d %s", user, code, b)
	}
	var u struct {
		Servers map[string]struct {
			State *struct {
				PodName   string `json:"pod_name"`
				Namespace string `json:"namespace"`
			} `json:"state"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		h.t.Fatal(err)
	}
	s, ok := u.Servers[server]
	if !ok || s.State == nil {
		h.t.Fatalf("the Hub has no state of %s/%s: %s", user, server, b)
	}
	return s.State.Namespace, s.State.PodName
}

// Users lists the Hub's user names through the API.
func (h *Hub) Users() []string {
	h.t.Helper()
	code, b := h.do("GET", "/hub/api/users", nil)
	if code != http.StatusOK {
		h.t.Fatalf("list users: %d %s", code, b)
	}
	var us []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &us); err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, u := range us {
		names = append(names, u.Name)
	}
	return names
}

// closedURL is a loopback URL where nothing listens.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + strings.TrimSpace(l.Addr().String())
}
