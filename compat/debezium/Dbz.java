// Dbz runs Debezium's MariaDB connector as the embedded engine (Json
// format) against one server and prints every change event it emits, one
// JSON object a line: {"topic":..., "key":..., "value":...}. It streams
// from a given binlog position (snapshot.mode=never: no snapshot and no
// schema queries, so the schema comes from the DDL in the binlog, which is
// why the caller starts before the tables' CREATE TABLE) and stops once
// stdin is closed or -Ddbz.max events were printed.
//
// Settings are Java system properties, never arguments, so that ps shows no
// password: dbz.host, dbz.port, dbz.user, dbz.file, dbz.pos, dbz.gtids (the
// offset's MariaDB GTID set: with it the connector resumes by GTID, as it
// does after a restart), dbz.databases, dbz.server-id, dbz.max,
// dbz.snapshot-mode (never; with an empty dbz.file the connector starts as
// a new one and takes the snapshot that mode asks for, no_data for the
// schema only), dbz.history (a file: Debezium's FileSchemaHistory, the
// schema history a deployment keeps, instead of EmptyHistory); the password is
// read from the environment (DBZ_PASSWORD). The test compiles this one file
// with javac against the jars it fetched from Maven Central.

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;

import java.io.InputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;

public class Dbz {
    static final String ENGINE = "sluice-dbz";
    static final String PREFIX = "dbz";

    // StartOffset is an in-memory offset store that holds, from the start,
    // the binlog position the connector resumes from: Debezium has no other
    // setting for "stream from this file and position".
    public static class StartOffset extends MemoryOffsetBackingStore {
        public StartOffset() {}

        @Override
        public void configure(WorkerConfig config) {
            super.configure(config);
            if (System.getProperty("dbz.file", "").isEmpty()) {
                return; // no start: the connector starts as new (snapshot.mode decides)
            }
            String key = "[\"" + ENGINE + "\",{\"server\":\"" + PREFIX + "\"}]";
            String gtids = System.getProperty("dbz.gtids", "");
            String value = "{\"file\":\"" + System.getProperty("dbz.file") + "\",\"pos\":" + System.getProperty("dbz.pos")
                + (gtids.isEmpty() ? "" : ",\"gtids\":\"" + gtids + "\"") + "}";
            data.put(ByteBuffer.wrap(key.getBytes(StandardCharsets.UTF_8)), ByteBuffer.wrap(value.getBytes(StandardCharsets.UTF_8)));
        }

        @Override
        public Set<Map<String, Object>> connectorPartitions(String connectorName) {
            return Collections.emptySet();
        }
    }

    // EmptyHistory is an in-memory schema history that counts as present
    // while still empty. A connector that finds an offset refuses to resume
    // without a history, and 2.7's FileSchemaHistory (final) counts an
    // empty file as missing. An empty history is right here: every table
    // of interest is created after the start position, so the DDL in the
    // binlog builds the whole schema, with no schema query to the server.
    public static class EmptyHistory extends io.debezium.relational.history.AbstractSchemaHistory {
        private final java.util.List<io.debezium.relational.history.HistoryRecord> records = new java.util.ArrayList<>();

        public EmptyHistory() {}

        @Override
        protected synchronized void storeRecord(io.debezium.relational.history.HistoryRecord r) {
            records.add(r);
        }

        @Override
        protected synchronized void recoverRecords(java.util.function.Consumer<io.debezium.relational.history.HistoryRecord> c) {
            records.forEach(c);
        }

        @Override
        public boolean storageExists() {
            return true;
        }

        @Override
        public boolean exists() {
            return true;
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.setProperty("name", ENGINE);
        p.setProperty("connector.class", "io.debezium.connector.mariadb.MariaDbConnector");
        p.setProperty("offset.storage", StartOffset.class.getName());
        p.setProperty("offset.flush.interval.ms", "60000");
        p.setProperty("database.hostname", System.getProperty("dbz.host", "127.0.0.1"));
        p.setProperty("database.port", System.getProperty("dbz.port"));
        p.setProperty("database.user", System.getProperty("dbz.user"));
        String pw = System.getenv("DBZ_PASSWORD");
        p.setProperty("database.password", pw == null ? "" : pw);
        p.setProperty("database.server.id", System.getProperty("dbz.server-id", "5401"));
        p.setProperty("topic.prefix", PREFIX);
        p.setProperty("snapshot.mode", System.getProperty("dbz.snapshot-mode", "never"));
        p.setProperty("include.schema.changes", "true");
        String history = System.getProperty("dbz.history", "");
        if (history.isEmpty()) {
            p.setProperty("schema.history.internal", EmptyHistory.class.getName());
        } else {
            // Debezium's default kind of history, kept in a file: the
            // schema snapshot's DDL goes there, as in a real deployment.
            p.setProperty("schema.history.internal", "io.debezium.storage.file.history.FileSchemaHistory");
            p.setProperty("schema.history.internal.file.filename", history);
        }
        String dbs = System.getProperty("dbz.databases");
        if (dbs != null && !dbs.isEmpty()) {
            p.setProperty("database.include.list", dbs);
        }
        // Fail on anything the connector cannot read instead of skipping it:
        // a skipped event would make two runs look equal when they are not.
        p.setProperty("event.processing.failure.handling.mode", "fail");
        p.setProperty("inconsistent.schema.handling.mode", "fail");
        p.setProperty("errors.max.retries", "0");
        p.setProperty("connect.timeout.ms", "10000");
        // 2.7.0's default ("preferred") is MySQL's name, which the MariaDB
        // JDBC driver refuses; the sandboxes and the service speak plain TCP.
        p.setProperty("database.ssl.mode", "disabled");

        int max = Integer.parseInt(System.getProperty("dbz.max", "0"));
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        AtomicInteger seen = new AtomicInteger();
        CountDownLatch stop = new CountDownLatch(1);
        CountDownLatch ended = new CountDownLatch(1);
        final String[] failure = {null};
        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
            .using(p)
            .using((success, message, error) -> {
                if (!success) {
                    failure[0] = message + (error == null ? "" : ": " + error);
                }
                ended.countDown();
                stop.countDown();
            })
            .notifying(ev -> {
                synchronized (out) {
                    out.println("{\"topic\":" + quote(ev.destination()) + ",\"key\":" + orNull(ev.key()) + ",\"value\":" + orNull(ev.value()) + "}");
                }
                if (max > 0 && seen.incrementAndGet() >= max) {
                    stop.countDown();
                }
            })
            .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                }
            } catch (Exception e) {
                // stdin gone: stop as if it was closed
            }
            stop.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        stop.await();
        engine.close();
        ended.await(30, TimeUnit.SECONDS);
        ex.shutdownNow();
        if (failure[0] != null) {
            System.err.println("dbz: engine failed: " + failure[0]);
            System.exit(1);
        }
        System.exit(0);
    }

    static String orNull(String s) {
        return s == null ? "null" : s;
    }

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
