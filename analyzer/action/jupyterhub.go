package action

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// KubeSpawner's pod annotations: the Hub's user name and server name as
// they are (its labels of the same keys hold escaped slugs, which are not
// names the Hub API knows, so they are not used).
const (
	AnnotationHubUser   = "hub.jupyter.org/username"
	AnnotationHubServer = "hub.jupyter.org/servername"
)

// PodLookup reads a finding's pod's annotations from the API server at
// decision time (kube.Pods). Its errors wrap ErrInvalid for names the API
// could not hold and ErrGone for a pod that no longer exists.
type PodLookup interface {
	Annotations(ctx context.Context, namespace, pod string) (map[string]string, error)
}

// JupyterHub reclaims idle notebook servers the way the Hub's own culler
// does: it stops the user's server through the Hub REST API, so the Hub
// knows the server is gone and the user can start a new one. It stands in
// for the Kubernetes actuator: pods that KubeSpawner did not start, and
// steps other than reclaiming an idle_session, go to Next. When the Hub
// cannot stop the server, the pod is evicted through Next only if
// FallbackEvict (the policy's kubernetes.jupyterhub_fallback) says so.
type JupyterHub struct {
	// URL of the Hub, e.g. http://hub:8081 (the API is under /hub/api).
	URL string
	// TokenFile holds an API token with the scopes read:users and
	// servers (or admin:servers). It is read at each use and never logged.
	TokenFile string
	// Pods reads the pod's annotations at decision time.
	Pods          PodLookup
	Next          Actuator
	FallbackEvict bool
	// Client defaults to one with a 10s timeout. Redirects are never
	// followed, whatever the client says: the token would go to wherever
	// the Hub (or a proxy) points, and a 307 or 308 would repeat a DELETE
	// there.
	Client *http.Client
	// Secrets masks the token (and any credential shape) in every error
	// text, since the Hub's answers go into the audit; nil masks shapes.
	Secrets *secret.Redactor
}

// Name implements Actuator: the Hub acts for Kubernetes pods.
func (j *JupyterHub) Name() string { return schema.SchedulerKubernetes }

// maxHubBody bounds what is read of a Hub answer.
const maxHubBody = 1 << 20

var errNotHubPod = errors.New("not a JupyterHub pod")

// server is the Hub user and server name of the finding's pod.
type hubServer struct{ user, name string }

func (s hubServer) String() string {
	if s.name == "" {
		return "server of " + s.user
	}
	return "server " + s.name + " of " + s.user
}

func (s hubServer) path() string {
	p := "/hub/api/users/" + url.PathEscape(s.user)
	if s.name == "" {
		return p + "/server"
	}
	return p + "/servers/" + url.PathEscape(s.name)
}

func (j *JupyterHub) lookup(ctx context.Context, req *Request) (hubServer, error) {
	if j.Pods == nil {
		return hubServer{}, errNotHubPod
	}
	ann, err := j.Pods.Annotations(ctx, req.Finding.Namespace, req.Finding.Pod)
	if err != nil {
		return hubServer{}, err
	}
	user := ann[AnnotationHubUser]
	if user == "" {
		return hubServer{}, errNotHubPod
	}
	return hubServer{user: user, name: ann[AnnotationHubServer]}, nil
}

// Act implements Actuator.
func (j *JupyterHub) Act(ctx context.Context, req *Request) (string, error) {
	if req.Step != StepReclaim || req.Finding.Pattern != schema.IdleSession {
		return j.next(ctx, req)
	}
	srv, err := j.lookup(ctx, req)
	if errors.Is(err, errNotHubPod) {
		return j.next(ctx, req)
	}
	if err != nil {
		return "", err
	}
	detail, err := j.stop(ctx, srv)
	if err == nil || errors.Is(err, ErrGone) || !j.FallbackEvict || j.Next == nil {
		return detail, err
	}
	d, nerr := j.Next.Act(ctx, req)
	if nerr != nil {
		return "", fmt.Errorf("JupyterHub: %w; eviction as the policy's fallback: %w", err, nerr)
	}
	return "JupyterHub: " + err.Error() + "; the policy's fallback: " + d, nil
}

func (j *JupyterHub) next(ctx context.Context, req *Request) (string, error) {
	if j.Next == nil {
		return "", fmt.Errorf("jupyterhub %s of %s: %w", req.Step, req.Finding.Pattern, ErrUnsupported)
	}
	return j.Next.Act(ctx, req)
}

// stop stops the server if the Hub says it runs.
func (j *JupyterHub) stop(ctx context.Context, srv hubServer) (string, error) {
	running, err := j.running(ctx, srv)
	if err != nil {
		return "", err
	}
	if !running {
		return "", fmt.Errorf("%s already stopped: %w", srv, ErrGone)
	}
	code, body, err := j.call(ctx, http.MethodDelete, srv.path())
	if err != nil {
		return "", err
	}
	switch code {
	case http.StatusNoContent:
		return "stopped the " + srv.String() + " through JupyterHub", nil
	case http.StatusAccepted:
		return "JupyterHub is stopping the " + srv.String(), nil
	}
	return "", fmt.Errorf("stop %s: JupyterHub answered %d: %s", srv, code, excerpt(body))
}

// running asks the Hub whether the server runs (or is starting).
func (j *JupyterHub) running(ctx context.Context, srv hubServer) (bool, error) {
	code, body, err := j.call(ctx, http.MethodGet, "/hub/api/users/"+url.PathEscape(srv.user))
	if err != nil {
		return false, err
	}
	if code != http.StatusOK {
		return false, fmt.Errorf("user %s: JupyterHub answered %d: %s", srv.user, code, excerpt(body))
	}
	var u struct {
		Servers map[string]struct {
			Ready   bool    `json:"ready"`
			Pending *string `json:"pending"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		return false, fmt.Errorf("user %s: JupyterHub's answer: %w", srv.user, err)
	}
	if u.Servers == nil {
		return false, fmt.Errorf("user %s: JupyterHub does not list servers (the token needs read:servers)", srv.user)
	}
	s, ok := u.Servers[srv.name]
	return ok && (s.Ready || s.Pending != nil), nil
}

// call sends one authenticated request and returns the status and the
// body (bounded).
func (j *JupyterHub) call(ctx context.Context, method, path string) (int, string, error) {
	red := j.Secrets
	if red == nil {
		red = &secret.Redactor{}
	}
	token, err := secret.ReadWord(j.TokenFile, red)
	if err != nil {
		return 0, "", fmt.Errorf("JupyterHub token: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(j.URL, "/")+path, nil)
	if err != nil {
		return 0, "", fmt.Errorf("JupyterHub request: %w", err)
	}
	r.Header.Set("Authorization", "token "+token)
	c := noRedirects(j.Client)
	resp, err := c.Do(r)
	if err != nil {
		return 0, "", red.Error(fmt.Errorf("JupyterHub unreachable: %w", err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHubBody))
	if err != nil {
		return 0, "", red.Error(fmt.Errorf("JupyterHub %s %s: %w", method, path, err))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return 0, "", fmt.Errorf("JupyterHub refused the token (%d) for %s %s", resp.StatusCode, method, path)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return 0, "", fmt.Errorf("JupyterHub answered %s %s with a redirect (%d): not followed (check --jupyterhub.url)", method, path, resp.StatusCode)
	}
	return resp.StatusCode, red.String(string(b)), nil
}

// noRedirects returns a copy of c (or of a default client with a 10 s
// timeout) that stops at the first redirect and hands it back.
func noRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	} else {
		cp.Timeout = 10 * time.Second
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// excerpt is a one-line, bounded piece of a Hub answer for the audit; the
// body was redacted by call.
func excerpt(b string) string {
	s := strings.Join(strings.Fields(b), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return termsafe.String(s)
}

// Reconcile implements Reconciler: a stop took effect when the Hub no
// longer runs the server.
func (j *JupyterHub) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	if req.Step != StepReclaim || req.Finding.Pattern != schema.IdleSession {
		if r, ok := j.Next.(Reconciler); ok {
			return r.Reconcile(ctx, req)
		}
		return Unknowable, "no way to check", nil
	}
	srv, err := j.lookup(ctx, req)
	switch {
	case errors.Is(err, ErrGone):
		return Applied, "pod " + req.Finding.Pod + " is gone", nil
	case errors.Is(err, errNotHubPod):
		if r, ok := j.Next.(Reconciler); ok {
			return r.Reconcile(ctx, req)
		}
		return Unknowable, "not a JupyterHub pod", nil
	case err != nil:
		return 0, "", err
	}
	running, err := j.running(ctx, srv)
	if err != nil {
		return 0, "", err
	}
	if running {
		return NotApplied, "the " + srv.String() + " still runs", nil
	}
	return Applied, "the " + srv.String() + " is stopped", nil
}
