package serve

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// capListener admits at most max open connections. When every slot is
// taken it first closes the connection that has sat idle longest between
// keep-alive requests, so that idle clients (600 scrapers that keep their
// connections open, a leaky client pool) never lock out a scrape; only
// when no connection is idle does it wait, and the kernel queues the rest.
type capListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	idle      map[*capConn]time.Time
}

func newCapListener(l net.Listener, max int) *capListener {
	return &capListener{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{}), idle: map[*capConn]time.Time{}}
}

// Close implements net.Listener; an Accept waiting for a slot returns.
func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept implements net.Listener.
func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.closeOldestIdle()
		select { // a slot frees when a connection closes
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &capConn{Conn: c, l: l}, nil
}

// closeOldestIdle closes the connection idle longest, if any is.
func (l *capListener) closeOldestIdle() {
	l.mu.Lock()
	var oldest *capConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
	}
}

// track follows a connection's state (http.Server.ConnState): only a
// keep-alive connection between requests may be closed to make room.
func (l *capListener) track(c *capConn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		l.idle[c] = time.Now()
		return
	}
	delete(l.idle, c)
}

// capConn gives its slot back once, on its first Close.
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.track(c, http.StateClosed)
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
