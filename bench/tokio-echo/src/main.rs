//! The Tokio side of the echo benchmark: `tokio_echo [port]` prints
//! "listening on 127.0.0.1:PORT" and echoes every connection, one task per
//! connection, on a current_thread runtime (one thread, as the others).
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        println!("listening on 127.0.0.1:{}", listener.local_addr().unwrap().port());
        use std::io::Write;
        std::io::stdout().flush().unwrap();
        loop {
            let (mut s, _) = match listener.accept().await {
                Ok(x) => x,
                Err(_) => continue,
            };
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}
