package integration

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP forwarder on a fixed loopback port in front of Redis, so
// guardian keeps one address while the container behind it restarts on a
// new port. Cut drops every connection and refuses new ones, as a network
// partition would. Delay holds back every reply of Redis, as a slow network
// would.
type proxy struct {
	ln net.Listener
	// delay is how long each reply of Redis is held back (nanoseconds).
	delay atomic.Int64

	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.dropAll()
		p.wg.Wait()
	})
	return p
}

// url is the redis:// URL guardian connects to.
func (p *proxy) url() string { return "redis://" + p.ln.Addr().String() + "/0" }

// setDelay holds back every reply of Redis by d from now on.
func (p *proxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// setCut cuts or restores the network between guardian and Redis.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	if cut {
		p.dropAll()
	}
}

func (p *proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		if !p.track(in) {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil || !p.track(out) {
			in.Close()
			if out != nil {
				out.Close()
			}
			continue
		}
		p.wg.Add(2)
		go p.pipe(out, in, false)
		go p.pipe(in, out, true)
	}
}

// pipe copies src to dst until either closes, holding each read back by the
// delay when src is Redis.
func (p *proxy) pipe(dst, src net.Conn, fromRedis bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); fromRedis && d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
