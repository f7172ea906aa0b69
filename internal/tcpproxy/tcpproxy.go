// Package tcpproxy is a TCP proxy for tests that puts real network faults
// between a client and a server: connections cut, bytes silently dropped
// (a blackhole, like a partition or a dead peer without RST), or delayed.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

type mode int

const (
	open mode = iota
	cut
	blackhole
)

// Proxy forwards connections from its own loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    mode
	latency time.Duration
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target until the
// test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpproxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() { p.set(cut) }

// Blackhole keeps connections open but drops every byte both ways, and
// accepts new connections without ever answering, until Restore.
func (p *Proxy) Blackhole() { p.set(blackhole) }

// SetLatency delays every chunk of bytes by d in both directions, like a
// slow or overloaded network; 0 turns the delay off.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Restore forwards new connections again, without latency. Connections that lived through a
// fault are closed, since bytes were lost on them.
func (p *Proxy) Restore() { p.set(open) }

func (p *Proxy) set(m mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	if m == open {
		p.latency = 0
	}
	if m != blackhole {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Conns is how many connections, client and server sides, are open.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy and closes all its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.set(cut)
	p.wg.Wait()
}

func (p *Proxy) current() (mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.latency
}

// track registers c; it reports false (and closes c) when the proxy is
// cutting connections.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == cut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			continue
		}
		p.wg.Add(1)
		go p.handle(client)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if m, _ := p.current(); m == blackhole {
		_, _ = io.Copy(io.Discard, client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, late by the latency, dropping what it reads
// while blackholed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		read := time.Now()
		m, latency := p.current()
		if n > 0 && m != blackhole {
			time.Sleep(time.Until(read.Add(latency)))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
