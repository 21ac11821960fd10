package serve

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// The protocol fuzz tests feed the listener what a hostile or broken
// client sends: random, truncated and mutated COM_* packets, before and
// after authentication (issue 30). The served binlog is a synthetic
// MariaDB binlog in memory, so that an iteration costs a connection, not
// a server. A panic in a session kills the test binary (as it would kill
// `sluice serve`); a session that outlives its client shows as a
// goroutine count that does not come back to the baseline.

// fuzzUser is the service's one account in the fuzz tests.
const fuzzUser, fuzzPass = "repl", "pw"

// fuzzServer serves a synthetic MariaDB binlog on a loopback port.
type fuzzServer struct {
	srv  *Server
	ln   net.Listener
	addr string
}

func startFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	srv, err := New(Config{ServerID: 999, Users: []User{{Name: fuzzUser, Password: fuzzPass}}}, newMariaBinlog(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	srv.slog = discardLogger()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return &fuzzServer{srv: srv, ln: ln, addr: ln.Addr().String()}
}

func (f *fuzzServer) close() { f.ln.Close(); f.srv.Close() }

// knownPanic reports whether a recovered panic was raised in go-mysql's
// code: its server reads client packets without checking their length (an
// empty command packet in dispatch, a handshake response shorter than its
// own length fields in readDb), and recover.go closes that session. A
// panic raised in sluice's code is a finding.
func knownPanic(p string) bool {
	lines := strings.Split(p, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") && i+2 < len(lines) {
			return strings.HasPrefix(lines[i+2], "github.com/go-mysql-org/go-mysql/")
		}
	}
	return false
}

// checkPanics fails the test on a recovered panic after the first from,
// other than the known one.
func (f *fuzzServer) checkPanics(tb testing.TB, from int, what string) int {
	tb.Helper()
	ps := f.srv.Panics()
	for _, p := range ps[min(from, len(ps)):] {
		if !knownPanic(p) {
			tb.Fatalf("%s: a session panicked: %s", what, p)
		}
	}
	return len(ps)
}

// sessions is the number of connections the server holds.
func (f *fuzzServer) sessions() int {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return len(f.srv.conns)
}

// settle waits until the server holds no connection and the goroutine
// count is back to base, and fails the test with a dump of the
// goroutines if it does not come back in time.
func (f *fuzzServer) settle(tb testing.TB, base int, what string) {
	tb.Helper()
	var n, g int
	sandboxtest.Eventually(tb, 20*time.Second, what+": no session and the goroutines back to the baseline", func() bool {
		n, g = f.sessions(), runtime.NumGoroutine()
		return n == 0 && g <= base
	}, func() string {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return fmt.Sprintf("%d sessions and %d goroutines remain, baseline %d:\n%s", n, g, base, buf)
	})
}

// writePacket frames one packet as the protocol does (payloads here stay
// under 16 MiB).
func writePacket(c net.Conn, seq byte, payload []byte) error {
	hdr := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}
	_, err := c.Write(append(hdr, payload...))
	return err
}

// drain reads what the server sends until it closes the connection or is
// quiet for quiet.
func drain(c net.Conn, quiet time.Duration) {
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// dialRaw connects and reads the server's greeting; the next packet the
// server reads is the handshake response (sequence 1).
func dialRaw(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		c.Close()
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dialAuthed connects as the service's user; the returned connection is
// at a command boundary (the next packet has sequence 0).
func dialAuthed(addr string) (net.Conn, error) {
	c, err := client.ConnectWithTimeout(addr, fuzzUser, fuzzPass, "", 5*time.Second)
	if err != nil {
		return nil, err
	}
	nc := c.Conn.Conn
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}

// handshakeResponse is a HandshakeResponse41 for user with an empty
// password (the server answers Access denied, or reads garbage).
func handshakeResponse(user string) []byte {
	caps := uint32(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_CONNECT_ATTRS | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 33)
	b = append(b, make([]byte, 23)...)
	b = append(b, user...)
	b = append(b, 0, 20)
	b = append(b, make([]byte, 20)...)
	b = append(b, "db"...)
	b = append(b, 0)
	b = append(b, mysql.AUTH_NATIVE_PASSWORD...)
	b = append(b, 0, 10, 3, 'k', 'e', 'y', 5, 'v', 'a', 'l', 'u', 'e')
	return b
}

// Command payloads a fuzzer starts from: one valid example of each
// command the service reads, with the ones a replica sends at connect.
func seedCommands() [][]byte {
	dump := func(pos uint32, flags uint16, id uint32, name string) []byte {
		b := []byte{mysql.COM_BINLOG_DUMP}
		b = binary.LittleEndian.AppendUint32(b, pos)
		b = binary.LittleEndian.AppendUint16(b, flags)
		b = binary.LittleEndian.AppendUint32(b, id)
		return append(b, name...)
	}
	dumpGTID := func(flags uint16, name string, set []byte) []byte {
		b := []byte{mysql.COM_BINLOG_DUMP_GTID}
		b = binary.LittleEndian.AppendUint16(b, flags)
		b = binary.LittleEndian.AppendUint32(b, 7)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(name)))
		b = append(b, name...)
		b = binary.LittleEndian.AppendUint64(b, 4)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(set)))
		return append(b, set...)
	}
	register := func(id uint32, host, user, pw string, port uint16) []byte {
		b := []byte{mysql.COM_REGISTER_SLAVE}
		b = binary.LittleEndian.AppendUint32(b, id)
		b = append(b, byte(len(host)))
		b = append(b, host...)
		b = append(b, byte(len(user)))
		b = append(b, user...)
		b = append(b, byte(len(pw)))
		b = append(b, pw...)
		b = binary.LittleEndian.AppendUint16(b, port)
		b = binary.LittleEndian.AppendUint32(b, 0)
		return binary.LittleEndian.AppendUint32(b, 0)
	}
	q := func(s string) []byte { return append([]byte{mysql.COM_QUERY}, s...) }
	mysqlSet, _ := mysql.ParseMysqlGTIDSet("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")
	return [][]byte{
		q("SET @master_binlog_checksum='CRC32'"),
		q("SET @master_binlog_checksum= @@global.binlog_checksum"),
		q("SET @slave_connect_state='0-1-3'"),
		q("SET @slave_connect_state='0-7-2,1-1-1'"),
		q("SET @slave_connect_state='garbage'"),
		q("SET @slave_gtid_strict_mode=1"),
		q("SET @master_heartbeat_period=1000000"),
		q("SET @mariadb_slave_capability=4"),
		q("SET NAMES latin1"),
		q("SELECT @@gtid_binlog_pos, @@server_id, @@version, UNIX_TIMESTAMP()"),
		q("SELECT @@global.gtid_domain_id"),
		q("SHOW VARIABLES LIKE 'server_uuid'"),
		q("SHOW MASTER STATUS"),
		q("SHOW BINARY LOGS"),
		q("SHOW BINLOG EVENTS IN 'mysql-bin.000001' FROM 4 LIMIT 2, 3"),
		q("SHOW SLAVE HOSTS"),
		q("SHOW FULL PROCESSLIST"),
		q("KILL 1"),
		q("SELECT * FROM information_schema.tables"),
		q("SET STATEMENT max_statement_time=1 FOR SELECT 1"),
		{mysql.COM_PING},
		{mysql.COM_QUIT},
		append([]byte{mysql.COM_INIT_DB}, "d"...),
		append([]byte{mysql.COM_FIELD_LIST}, "t\x00"...),
		append([]byte{mysql.COM_STMT_PREPARE}, "SELECT ?"...),
		{mysql.COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_LONG, 0, 1, 0, 0, 0},
		{mysql.COM_STMT_CLOSE, 1, 0, 0, 0},
		{mysql.COM_STMT_RESET, 1, 0, 0, 0},
		{mysql.COM_STMT_SEND_LONG_DATA, 1, 0, 0, 0, 0, 0, 'x'},
		{mysql.COM_SET_OPTION, 0, 0},
		{mysql.COM_STATISTICS},
		{mysql.COM_RESET_CONNECTION},
		append([]byte{mysql.COM_CHANGE_USER}, "repl\x00\x00\x00"...),
		register(7, "h", "u", "p", 3306),
		register(999, "", "", "", 0),
		dump(4, dumpNonBlock, 0, "mysql-bin.000001"),
		dump(4, dumpNonBlock|dumpSendAnnotate, 8, "mysql-bin.000002"),
		dump(0, dumpNonBlock, 9, "\x00\x00\x00\x00"),
		dump(4, 0, 10, ""),
		dump(123, dumpNonBlock, 11, "mysql-bin.000001"),
		dump(4, dumpNonBlock, 999, "mysql-bin.000001"),
		dump(4, dumpNonBlock, 12, "../../etc/passwd"),
		dumpGTID(dumpNonBlock, "", mysqlSet.Encode()),
		dumpGTID(dumpNonBlock, "binlog.000001", []byte{1, 2, 3}),
		dumpGTID(0, "", nil),
	}
}

// mutate changes a payload as a broken client might: truncation, flipped
// and inserted bytes, a wrong length field, or random bytes.
func mutate(rng *rand.Rand, p []byte) []byte {
	p = append([]byte(nil), p...)
	switch rng.Intn(6) {
	case 0: // as is
	case 1: // truncated, maybe to nothing
		p = p[:rng.Intn(len(p)+1)]
	case 2: // a few bytes flipped
		for i := 0; i < 1+rng.Intn(4) && len(p) > 0; i++ {
			p[rng.Intn(len(p))] ^= byte(1 + rng.Intn(255))
		}
	case 3: // bytes inserted
		i := rng.Intn(len(p) + 1)
		ins := make([]byte, 1+rng.Intn(16))
		rng.Read(ins)
		p = append(p[:i], append(ins, p[i:]...)...)
	case 4: // a 0xff run (large lengths, high flags)
		i := rng.Intn(len(p) + 1)
		for j := i; j < len(p) && j < i+8; j++ {
			p[j] = 0xff
		}
	case 5: // random bytes, a random command
		p = make([]byte, rng.Intn(64))
		rng.Read(p)
	}
	return p
}

// TestServeProtocolFuzz: seeded random sessions against the listener,
// half before authentication (mutated handshake responses) and half after
// (a sequence of mutated commands), with no panic, and with the sessions
// and their goroutines gone once the clients hang up. SLUICE_FUZZ_SEED
// replays a seed; SLUICE_FUZZ_N sets the number of sessions.
func TestServeProtocolFuzz(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_FUZZ_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	n := 1000
	if s := os.Getenv("SLUICE_FUZZ_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (SLUICE_FUZZ_SEED=%d replays it)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d", seed)
		}
	}()
	rng := rand.New(rand.NewSource(seed))
	f := startFuzzServer(t)
	defer f.close()
	// The baseline is taken with the accept loop running and one session
	// served and gone, so that lazily started runtime goroutines count.
	if c, err := dialAuthed(f.addr); err == nil {
		c.Close()
	}
	f.settle(t, 1<<30, "warm-up")
	base := runtime.NumGoroutine()
	cmds := seedCommands()
	for i := 0; i < n; i++ {
		var c net.Conn
		var err error
		authed := rng.Intn(2) == 0
		if authed {
			c, err = dialAuthed(f.addr)
		} else {
			c, err = dialRaw(f.addr)
		}
		if err != nil {
			t.Fatalf("session %d (seed %d): connect: %v", i, seed, err)
		}
		seq := byte(0)
		if !authed {
			seq = 1
			user := []string{fuzzUser, "root", "", "\x00\xff"}[rng.Intn(4)]
			_ = writePacket(c, seq, mutate(rng, handshakeResponse(user)))
		}
		for k := rng.Intn(6); k >= 0; k-- {
			p := mutate(rng, cmds[rng.Intn(len(cmds))])
			if writePacket(c, seq, p) != nil {
				break
			}
			if !authed {
				seq++ // garbage sequence numbers too
			}
		}
		if rng.Intn(4) == 0 {
			// A packet header that promises more than comes.
			_, _ = c.Write([]byte{0xff, 0xff, 0x00, 0, mysql.COM_QUERY, 'S'})
		}
		drain(c, 20*time.Millisecond)
		c.Close()
		if i%50 == 49 {
			f.settle(t, base, fmt.Sprintf("after session %d (seed %d)", i, seed))
		}
	}
	f.settle(t, base, fmt.Sprintf("at the end (seed %d)", seed))
	t.Logf("%d sessions; %d closed on a panic in go-mysql's server (recovered)", n, f.checkPanics(t, 0, fmt.Sprintf("seed %d", seed)))
	// And the server still serves: a dump by GTID gets the whole binlog.
	checkStillServes(t, f.addr)
}

// checkStillServes runs a GTID dump through go-mysql's syncer from the
// start of the synthetic binlog and expects its last transaction.
func checkStillServes(t *testing.T, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7300, Flavor: "mariadb", Host: host, Port: uint16(p), User: fuzzUser, Password: fuzzPass})
	defer s.Close()
	set, err := mysql.ParseMariadbGTIDSet("0-1-1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.StartSyncGTID(set)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ctx, cancel := contextWithTimeout(10 * time.Second)
		ev, err := st.GetEvent(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after the fuzzing, a GTID dump: %v", err)
		}
		if g, ok := ev.Event.(*replication.MariadbGTIDEvent); ok && g.GTID.SequenceNumber == mariaLastSeq {
			return
		}
	}
}

// FuzzServeProtocol is the native fuzz target: the input is a sequence of
// packets, each a length byte and that many bytes (the rest if fewer),
// sent before authentication (as the handshake response and what follows)
// or after it. Seeds: the handshake response and each command of
// seedCommands. Run: go test -run '^$' -fuzz FuzzServeProtocol -parallel 1 ./serve/
func FuzzServeProtocol(f *testing.F) {
	f.Add(false, frame(handshakeResponse(fuzzUser)))
	f.Add(false, frame(handshakeResponse("root"), []byte{mysql.COM_PING}))
	for _, c := range seedCommands() {
		f.Add(true, frame(c))
	}
	f.Add(true, frame(append([]byte{mysql.COM_QUERY}, "SET @slave_connect_state='0-1-2'"...), seedCommands()[len(seedCommands())-8]))
	srv := startFuzzServer(f)
	defer srv.close()
	f.Fuzz(func(t *testing.T, authed bool, data []byte) {
		var c net.Conn
		var err error
		if authed {
			c, err = dialAuthed(srv.addr)
		} else {
			c, err = dialRaw(srv.addr)
		}
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer c.Close()
		seq := byte(0)
		if !authed {
			seq = 1
		}
		for _, p := range unframe(data) {
			if writePacket(c, seq, p) != nil {
				break
			}
		}
		drain(c, 5*time.Millisecond)
		c.Close()
		srv.checkPanics(t, 0, "input")
	})
}

// frame joins packets for FuzzServeProtocol's input; unframe splits it.
func frame(ps ...[]byte) []byte {
	var out []byte
	for _, p := range ps {
		if len(p) > 255 {
			p = p[:255]
		}
		out = append(out, byte(len(p)))
		out = append(out, p...)
	}
	return out
}

func unframe(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 && len(out) < 16 {
		n := int(b[0])
		b = b[1:]
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// mariaLastSeq is the last GTID's sequence number in newMariaBinlog.
const mariaLastSeq = 6

// newMariaBinlog is a synthetic MariaDB binlog: two files, each with its
// format description event and Gtid_list, three transactions of domain 0
// each (server ids 1, then 2 at sequence number 5), and a Rotate between.
func newMariaBinlog(tb testing.TB) Binlog {
	tb.Helper()
	mb := &memBinlog{files: map[string][]Event{}}
	seq := uint64(1)
	state := &binlogState{}
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("mysql-bin.%06d", i+1)
		mb.names = append(mb.names, name)
		off := uint32(4)
		add := func(typ replication.EventType, server uint32, body []byte, boundary bool) {
			size := uint32(headerSize + len(body) + 4)
			raw := buildEvent(typ, server, 1700000000, off+size, 0, body, true)
			off += size
			mb.files[name] = append(mb.files[name], Event{Data: raw, Type: typ, Pos: sluice.Position{File: name, Pos: off}, Boundary: boundary})
		}
		fde := binary.LittleEndian.AppendUint16(nil, 4)
		fde = append(fde, make([]byte, 50)...)
		copy(fde[2:], "10.11.0-MariaDB-log")
		fde = append(fde, 0, 0, 0, 0, headerSize)
		fde = append(fde, make([]byte, 164)...) // post-header lengths: not read here
		fde = append(fde, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
		add(replication.FORMAT_DESCRIPTION_EVENT, 1, fde, true)
		add(replication.MARIADB_GTID_LIST_EVENT, 1, state.body(), true)
		for k := 0; k < 3; k++ {
			server := uint32(1)
			if seq >= 5 {
				server = 2
			}
			g := binary.LittleEndian.AppendUint64(nil, seq)
			g = binary.LittleEndian.AppendUint32(g, 0)
			g = append(g, 0)                  // flags2
			g = append(g, make([]byte, 6)...) // to the post-header length, 19
			add(replication.MARIADB_GTID_EVENT, server, g, false)
			state.update(gtid{0, server, seq})
			q := make([]byte, 13) // thread id, exec time, db length 0, error code, no status vars
			q = append(q, 0)
			q = append(q, fmt.Sprintf("CREATE TABLE t%d (a int)", seq)...)
			add(replication.QUERY_EVENT, server, q, true)
			seq++
		}
		if i == 0 {
			add(replication.ROTATE_EVENT, 1, append(binary.LittleEndian.AppendUint64(nil, 4), "mysql-bin.000002"...), true)
		}
	}
	return mariaMem{mb, fmt.Sprintf("0-2-%d", seq-1)}
}

// mariaMem is a memBinlog with a GTID position.
type mariaMem struct {
	*memBinlog
	pos string
}

func (m mariaMem) GTIDPos() (string, error) { return m.pos, nil }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// TestEmptyCommandPacket: an empty command packet panicked in go-mysql's
// server and, with no recover, ended the whole process (found by
// TestServeProtocolFuzz). Now only that session is closed, the panic is
// logged, and the service goes on serving.
func TestEmptyCommandPacket(t *testing.T) {
	f := startFuzzServer(t)
	defer f.close()
	c, err := dialAuthed(f.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePacket(c, 0, nil); err != nil {
		t.Fatal(err)
	}
	drain(c, 5*time.Second) // returns when the server closes the session
	c.Close()
	if ps := f.srv.Panics(); len(ps) != 1 || !knownPanic(ps[0]) {
		t.Fatalf("recovered panics %q, want go-mysql's one on an empty packet", ps)
	}
	checkStillServes(t, f.addr)
}
