package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one keep-alive HTTP/1.1 connection to the service under test. It
// writes requests from a reused buffer and reads responses that carry a
// Content-Length (every answer of /healthz, /v1/check and /v1/report does),
// so the load generator spends as little of the shared CPU as it can on its
// own HTTP. A conn is used by one worker at a time; after an error it
// redials on the next request.
type conn struct {
	addr string
	auth string // the Authorization header value, "" for none
	// extra are more header lines, each ending in CRLF.
	extra   string
	timeout time.Duration

	c    net.Conn
	r    *bufio.Reader
	wbuf []byte
	body []byte
}

// newConn returns a conn to addr (host:port) that sends auth as a bearer
// token and gives each request timeout to complete.
func newConn(addr, token string, timeout time.Duration) *conn {
	cn := &conn{addr: addr, timeout: timeout}
	if token != "" {
		cn.auth = "Bearer " + token
	}
	return cn
}

// errResponse reports a response the load generator cannot read.
var errResponse = errors.New("load: unreadable response")

// do sends one request and returns the status and the body, which stays
// valid until the next call. body nil sends no body.
func (cn *conn) do(method, path string, body []byte) (int, []byte, error) {
	if cn.c == nil {
		c, err := net.DialTimeout("tcp", cn.addr, cn.timeout)
		if err != nil {
			return 0, nil, err
		}
		cn.c = c
		cn.r = bufio.NewReaderSize(c, 4096)
	}
	status, resp, err := cn.roundTrip(method, path, body)
	if err != nil {
		cn.close()
	}
	return status, resp, err
}

// roundTrip writes one request and reads its response on the open
// connection.
func (cn *conn) roundTrip(method, path string, body []byte) (int, []byte, error) {
	if err := cn.c.SetDeadline(time.Now().Add(cn.timeout)); err != nil {
		return 0, nil, err
	}
	b := cn.wbuf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, cn.addr...)
	b = append(b, "\r\n"...)
	if cn.auth != "" {
		b = append(b, "Authorization: "...)
		b = append(b, cn.auth...)
		b = append(b, "\r\n"...)
	}
	b = append(b, cn.extra...)
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	cn.wbuf = b
	if _, err := cn.c.Write(b); err != nil {
		return 0, nil, err
	}
	return cn.readResponse()
}

// readResponse reads a status line, the headers and a Content-Length body.
func (cn *conn) readResponse() (int, []byte, error) {
	line, err := cn.line()
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, nil, fmt.Errorf("%w: status line %q", errResponse, line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: status line %q", errResponse, line)
	}
	length, closing := -1, false
	for {
		h, err := cn.line()
		if err != nil {
			return 0, nil, err
		}
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, fmt.Errorf("%w: header %q", errResponse, h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("%w: content-length %q", errResponse, value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, fmt.Errorf("%w: transfer-encoding %q is not supported", errResponse, value)
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	if length < 0 {
		return 0, nil, fmt.Errorf("%w: no content-length", errResponse)
	}
	if cap(cn.body) < length {
		cn.body = make([]byte, length)
	}
	cn.body = cn.body[:length]
	if _, err := io.ReadFull(cn.r, cn.body); err != nil {
		return 0, nil, err
	}
	if closing {
		cn.close()
	}
	return status, cn.body, nil
}

// line reads one CRLF-terminated line without its terminator. The line is
// valid until the next read.
func (cn *conn) line() ([]byte, error) {
	l, err := cn.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errResponse, cn.r.Size())
		}
		return nil, err
	}
	return bytes.TrimRight(l, "\r\n"), nil
}

// close drops the connection; the next request dials again.
func (cn *conn) close() {
	if cn.c != nil {
		_ = cn.c.Close()
		cn.c, cn.r = nil, nil
	}
}
