package tierlab.ycsb;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for Redis, speaking RESP2 over a plain TCP socket (one connection per
 * YCSB client thread, one request in flight at a time).
 *
 * <p>Data layout as in YCSB's own Redis binding: a record is a hash (HSET key field
 * value ...); inserts also add the key to the sorted set {@code _indices}, scored by
 * {@code key.hashCode()}, which scans walk with ZRANGEBYSCORE.
 *
 * <p>Properties: {@code redis.host} (127.0.0.1), {@code redis.port} (6379),
 * {@code redis.index} (true: maintain {@code _indices}; false skips it, and scans fail).
 */
public class RedisClient extends DB {
  public static final String HOST = "redis.host";
  public static final String PORT = "redis.port";
  public static final String INDEX = "redis.index";
  private static final byte[] INDEX_KEY = bytes("_indices");
  private static final byte[] CRLF = {'\r', '\n'};

  private Socket socket;
  private BufferedOutputStream out;
  private BufferedInputStream in;
  private boolean index;

  /** An error reply from the server ("-ERR ..."). */
  static final class ReplyError extends IOException {
    ReplyError(String message) {
      super(message);
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String host = p.getProperty(HOST, "127.0.0.1");
    String port = p.getProperty(PORT, "6379");
    index = Boolean.parseBoolean(p.getProperty(INDEX, "true"));
    try {
      socket = new Socket();
      socket.setTcpNoDelay(true);
      socket.connect(new InetSocketAddress(host, Integer.parseInt(port)), 30000);
      out = new BufferedOutputStream(socket.getOutputStream(), 1 << 16);
      in = new BufferedInputStream(socket.getInputStream(), 1 << 16);
    } catch (IOException | NumberFormatException e) {
      throw new DBException("cannot connect to redis at " + host + ":" + port + ": " + e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    try {
      if (socket != null) {
        socket.close();
      }
    } catch (IOException e) {
      throw new DBException(e);
    }
  }

  // ---- RESP ------------------------------------------------------------------------

  private Object call(List<byte[]> args) throws IOException {
    out.write('*');
    writeNumber(args.size());
    for (byte[] a : args) {
      out.write('$');
      writeNumber(a.length);
      out.write(a);
      out.write(CRLF);
    }
    out.flush();
    return reply();
  }

  private void writeNumber(long n) throws IOException {
    out.write(Long.toString(n).getBytes(StandardCharsets.US_ASCII));
    out.write(CRLF);
  }

  private int next() throws IOException {
    int c = in.read();
    if (c < 0) {
      throw new EOFException("connection closed by redis");
    }
    return c;
  }

  private String line() throws IOException {
    StringBuilder sb = new StringBuilder();
    for (int c = next(); c != '\r'; c = next()) {
      sb.append((char) c);
    }
    if (next() != '\n') {
      throw new IOException("RESP protocol error: CR not followed by LF");
    }
    return sb.toString();
  }

  private Object reply() throws IOException {
    int type = next();
    String s = line();
    switch (type) {
      case '+':
        return s;
      case '-':
        throw new ReplyError(s);
      case ':':
        return Long.parseLong(s);
      case '$': {
        int n = Integer.parseInt(s);
        if (n < 0) {
          return null;
        }
        byte[] b = in.readNBytes(n);
        if (b.length < n || next() != '\r' || next() != '\n') {
          throw new EOFException("truncated bulk string from redis");
        }
        return b;
      }
      case '*': {
        int n = Integer.parseInt(s);
        if (n < 0) {
          return null;
        }
        List<Object> items = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          items.add(reply());
        }
        return items;
      }
      default:
        throw new IOException("RESP protocol error: unknown reply type '" + (char) type + "'");
    }
  }

  private static List<byte[]> command(String name, String key) {
    List<byte[]> args = new ArrayList<>();
    args.add(bytes(name));
    args.add(bytes(key));
    return args;
  }

  private static void addValues(List<byte[]> args, Map<String, ByteIterator> values) {
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      args.add(bytes(e.getKey()));
      args.add(e.getValue().toArray());
    }
  }

  private static Status failed(String op, IOException e) {
    System.err.println("redis " + op + ": " + e.getMessage());
    return Status.ERROR;
  }

  // ---- YCSB operations --------------------------------------------------------------

  private Status readInto(String key, Set<String> fields, Map<String, ByteIterator> result)
      throws IOException {
    if (fields == null) {
      List<?> r = (List<?>) call(command("HGETALL", key));
      if (r == null || r.isEmpty()) {
        return Status.NOT_FOUND;
      }
      for (int i = 0; i + 1 < r.size(); i += 2) {
        result.put(new String((byte[]) r.get(i), StandardCharsets.UTF_8),
            new ByteArrayByteIterator((byte[]) r.get(i + 1)));
      }
      return Status.OK;
    }
    List<byte[]> args = command("HMGET", key);
    List<String> names = new ArrayList<>(fields);
    for (String f : names) {
      args.add(bytes(f));
    }
    List<?> r = (List<?>) call(args);
    boolean any = false;
    for (int i = 0; r != null && i < names.size(); i++) {
      if (r.get(i) != null) {
        result.put(names.get(i), new ByteArrayByteIterator((byte[]) r.get(i)));
        any = true;
      }
    }
    return any ? Status.OK : Status.NOT_FOUND;
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
      Map<String, ByteIterator> result) {
    try {
      return readInto(key, fields, result);
    } catch (IOException e) {
      return failed("read", e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    Status written = update(table, key, values);
    if (!written.isOk() || !index) {
      return written;
    }
    try {
      List<byte[]> z = new ArrayList<>();
      z.add(bytes("ZADD"));
      z.add(INDEX_KEY);
      z.add(bytes(Double.toString(key.hashCode())));
      z.add(bytes(key));
      call(z);
      return Status.OK;
    } catch (IOException e) {
      return failed("insert", e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      List<byte[]> args = command("HSET", key);
      addValues(args, values);
      call(args);
      return Status.OK;
    } catch (IOException e) {
      return failed("update", e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      Object n = call(command("DEL", key));
      if (index) {
        List<byte[]> z = new ArrayList<>();
        z.add(bytes("ZREM"));
        z.add(INDEX_KEY);
        z.add(bytes(key));
        call(z);
      }
      return Long.valueOf(1L).equals(n) ? Status.OK : Status.NOT_FOUND;
    } catch (IOException e) {
      return failed("delete", e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    if (!index) {
      System.err.println("redis scan: needs redis.index=true");
      return Status.NOT_IMPLEMENTED;
    }
    try {
      List<byte[]> args = new ArrayList<>();
      args.add(bytes("ZRANGEBYSCORE"));
      args.add(INDEX_KEY);
      args.add(bytes(Double.toString(startkey.hashCode())));
      args.add(bytes("+inf"));
      args.add(bytes("LIMIT"));
      args.add(bytes("0"));
      args.add(bytes(Integer.toString(recordcount)));
      List<?> keys = (List<?>) call(args);
      for (Object k : keys) {
        HashMap<String, ByteIterator> values = new HashMap<>();
        readInto(new String((byte[]) k, StandardCharsets.UTF_8), fields, values);
        result.add(values);
      }
      return Status.OK;
    } catch (IOException e) {
      return failed("scan", e);
    }
  }
}
