// What both AI SDK routes for tamesu's tests share (ai_sdk_chat.mjs, ai4/ai_sdk4_chat.mjs): node's own http server
// on a free port of 127.0.0.1, POST /api/chat with a JSON body handed to `answer(messages, response)`, the address
// printed once it listens, and a clean exit on SIGTERM or SIGINT; with a `log`, GET /api/log answers it as JSON.
import http from 'node:http';

export function serveChatRoute(answer, log = null) {
  const server = http.createServer(async (request, response) => {
    if (log !== null && request.method === 'GET' && request.url === '/api/log') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(log));
      return;
    }
    if (request.method !== 'POST' || request.url !== '/api/chat') {
      response.writeHead(404).end();
      return;
    }
    let body = '';
    for await (const chunk of request) body += chunk;
    await answer(JSON.parse(body).messages, response);
  });
  server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
}
