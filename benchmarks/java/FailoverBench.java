import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java's KafkaProducer at a fixed rate while the orchestrator (benchmarks/failover.py) kills a
 * partition leader.
 *
 * <pre>java -cp 'libs/*:classes' FailoverBench --bootstrap B --topic T --rate N --size BYTES
 *     --out FILE [--linger-ms MS] [--compression CODEC] [--max-seconds S]</pre>
 *
 * Idempotent, acks=all, everything else Java's defaults. After one acknowledged record it prints
 * {"event":"ready"} and sends record i when it is due (start + i / rate); a line on stdin stops
 * it. It then flushes, writes to FILE the due time and acknowledgement time of every record
 * (epoch microseconds; -1 for a record that failed) as JSON, and prints {"event":"done"}.
 */
public final class FailoverBench {
    private FailoverBench() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        String topic = args.get("topic");
        int rate = Integer.parseInt(args.getOrDefault("rate", "10000"));
        int size = Integer.parseInt(args.getOrDefault("size", "100"));
        int maxSeconds = Integer.parseInt(args.getOrDefault("max-seconds", "300"));
        int capacity = rate * maxSeconds;

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "java-failover-bench");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.getOrDefault("linger-ms", "5"));
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.getOrDefault("compression", "none"));

        byte[] value = new byte[size];
        new Random().nextBytes(value);
        long[] due = new long[capacity];
        AtomicLongArray acked = new AtomicLongArray(capacity);
        AtomicLong failed = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        // Epoch microseconds from the monotonic clock: one reading of the wall clock at start.
        long epochMicros0 = micros(Instant.now());
        long nanos0 = System.nanoTime();

        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.send(new ProducerRecord<>(topic, value)).get(120, TimeUnit.SECONDS);
            emit("{\"event\":\"ready\"}");
            Thread stopper = new Thread(() -> {
                try {
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                } catch (IOException ignored) {
                    // stdin closed: stop as well
                }
            });
            stopper.setDaemon(true);
            stopper.start();

            long start = System.nanoTime();
            int sent = 0;
            while (stopper.isAlive() && sent < capacity) {
                long dueNanos = start + (long) (sent * (1e9 / rate));
                long wait = dueNanos - System.nanoTime();
                if (wait > 0) {
                    LockSupport.parkNanos(Math.min(wait, 1_000_000L));
                    continue;
                }
                final int i = sent;
                due[i] = epochMicros0 + (dueNanos - nanos0) / 1000;
                producer.send(new ProducerRecord<>(topic, value), (md, exc) -> {
                    if (exc == null) {
                        acked.set(i, epochMicros0 + (System.nanoTime() - nanos0) / 1000);
                    } else {
                        acked.set(i, -1);
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, exc.toString());
                    }
                });
                sent++;
            }
            producer.flush();
            write(args.get("out"), due, acked, sent, failed.get(), firstError.get());
            emit("{\"event\":\"done\",\"sent\":" + sent + ",\"failed\":" + failed.get() + "}");
        }
    }

    private static long micros(Instant t) {
        return t.getEpochSecond() * 1_000_000L + t.getNano() / 1000;
    }

    private static void write(String path, long[] due, AtomicLongArray acked, int sent, long failed,
                              String firstError) throws IOException {
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(path), StandardCharsets.UTF_8)) {
            out.write("{\"failed\":" + failed + ",\"first_error\":");
            out.write(firstError == null ? "null" : quote(firstError));
            out.write(",\"due_us\":[");
            for (int i = 0; i < sent; i++) {
                if (i > 0) out.write(',');
                out.write(Long.toString(due[i]));
            }
            out.write("],\"ack_us\":[");
            for (int i = 0; i < sent; i++) {
                if (i > 0) out.write(',');
                out.write(Long.toString(acked.get(i)));
            }
            out.write("]}");
        }
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(' ');
            else b.append(c);
        }
        return b.append('"').toString();
    }

    private static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String required : new String[] {"bootstrap", "topic", "out"}) {
            if (!args.containsKey(required)) {
                throw new IllegalArgumentException("--" + required + " is required");
            }
        }
        return args;
    }
}
