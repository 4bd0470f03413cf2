package serve

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// capListener admits at most max open connections. When every slot is
// taken and another connection arrives, it makes room: first it closes the
// connection that has sent no request for longest (600 connections opened
// and left silent would otherwise hold every slot until the header
// timeout), then the one idle longest between keep-alive requests (scrapers
// that keep their connections open, a leaky client pool). A connection
// serving a request is never closed. A connection counts as silent only
// after grace: a burst of real clients, whose requests are on their way,
// is not taken for a flood.
type capListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	grace     time.Duration
	now       func() time.Time
	mu        sync.Mutex
	// silent are the connections that have sent no request yet, idle the
	// keep-alive ones between requests, each with the time it became so.
	silent, idle map[*capConn]time.Time
}

// retryRoom is how often an Accept waiting for a slot looks again for a
// connection to close (one may have turned silent or idle meanwhile).
const retryRoom = 20 * time.Millisecond

func newCapListener(l net.Listener, max int, grace time.Duration) *capListener {
	return &capListener{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{}), grace: grace, now: time.Now,
		silent: map[*capConn]time.Time{}, idle: map[*capConn]time.Time{}}
}

// Close implements net.Listener; an Accept waiting for a slot returns.
func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept implements net.Listener. Room is made only once a connection is
// there to take it: evicting ahead of time would close a connection for a
// client that may never come.
func (l *capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := l.takeSlot(); err != nil {
		c.Close()
		return nil, err
	}
	cc := &capConn{Conn: c, l: l}
	// Silent from the moment it is accepted: the server reports StateNew
	// only once its goroutine runs.
	l.mu.Lock()
	l.silent[cc] = l.now()
	l.mu.Unlock()
	return cc, nil
}

// takeSlot takes a free slot, making room when there is none, and waits
// for one (the kernel queues the connections behind) while every slot
// serves a request.
func (l *capListener) takeSlot() error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	tick := time.NewTicker(retryRoom)
	defer tick.Stop()
	for {
		l.makeRoom()
		select { // a slot frees when a connection closes
		case l.slots <- struct{}{}:
			return nil
		case <-l.done:
			return net.ErrClosed
		case <-tick.C:
		}
	}
}

// makeRoom closes the connection silent longest (past grace), else the
// one idle longest, if any.
func (l *capListener) makeRoom() {
	l.mu.Lock()
	c, since := oldest(l.silent)
	if c == nil || l.now().Sub(since) < l.grace {
		c, _ = oldest(l.idle)
	}
	if c != nil {
		delete(l.silent, c)
		delete(l.idle, c)
	}
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func oldest(m map[*capConn]time.Time) (*capConn, time.Time) {
	var o *capConn
	var since time.Time
	for c, t := range m {
		if o == nil || t.Before(since) {
			o, since = c, t
		}
	}
	return o, since
}

// track follows a connection's state (http.Server.ConnState): a new one is
// silent until its first request, an idle one is between requests, and
// only those may be closed to make room.
func (l *capListener) track(c *capConn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed { // closed to make room before the server saw it
		return
	}
	switch s {
	case http.StateNew:
		if _, ok := l.silent[c]; !ok {
			l.silent[c] = l.now()
		}
	case http.StateIdle:
		delete(l.silent, c)
		l.idle[c] = l.now()
	default:
		delete(l.silent, c)
		delete(l.idle, c)
	}
}

// capConn gives its slot back once, on its first Close.
type capConn struct {
	net.Conn
	l      *capListener
	once   sync.Once
	closed bool // under l.mu
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		delete(c.l.silent, c)
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// connState routes the server's connection states to the listener that
// accepted each connection (through TLS, whose conn wraps ours).
func connState(c net.Conn, s http.ConnState) {
	for {
		switch v := c.(type) {
		case *capConn:
			v.l.track(v, s)
			return
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return
		}
	}
}
