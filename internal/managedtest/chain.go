package managedtest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// chainProxy is the provider's side of a custom proxy: Chromium takes no
// proxy credential on its command line, so a provider runs a local proxy
// that forwards each request to the customer's proxy with the credential
// the session was created with (Steel's browser does so). Here it listens
// on loopback and speaks to proxyd.
type chainProxy struct {
	ln       net.Listener
	upstream string // host:port of the customer's proxy
	auth     string // Proxy-Authorization value; never logged

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startChain(upstream, user, password string) (*chainProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &chainProxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	if user != "" || password != "" {
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// URL is what Chromium's --proxy-server takes.
func (p *chainProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *chainProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *chainProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *chainProxy) handle(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	up, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
	if err != nil {
		fmt.Fprint(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	if req.Method == http.MethodConnect {
		head := "CONNECT " + req.Host + " HTTP/1.1\r\nHost: " + req.Host + "\r\n"
		if p.auth != "" {
			head += "Proxy-Authorization: " + p.auth + "\r\n"
		}
		if _, err := io.WriteString(up, head+"\r\n"); err != nil {
			return
		}
	} else {
		// One request per connection: a later one on a kept-alive
		// connection would go without the credential.
		req.Header.Set("Connection", "close")
		if p.auth != "" {
			req.Header.Set("Proxy-Authorization", p.auth)
		}
		if err := req.WriteProxy(up); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (p *chainProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
