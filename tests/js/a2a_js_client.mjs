// An A2A client built on the JavaScript SDK (@a2a-js/sdk), for tamesu's interop tests: for each combination
// asked for it reads the agent's card, keeps the one interface of that binding and version, sends one message
// and prints what came back as one JSON line.
//
//   node a2a_js_client.mjs CARD_URL TEXT BINDING@VERSION[@legacy]...
//
// BINDING is JSONRPC, HTTP+JSON or GRPC; VERSION 1.0 or 0.3. "@legacy" makes the client read the card as an
// A2A 0.3 client would (url, preferredTransport, additionalInterfaces only). Exits 1 if any call failed.
import { AgentCard, Role, taskStateToJSON } from '@a2a-js/sdk';
import {
  ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';

const [cardUrl, text, ...combos] = process.argv.slice(2);
// the whole run is bounded: a client that never hears back must not hang the test that started it
const deadline = setTimeout(() => { console.log(JSON.stringify({ ok: false, error: 'no answer within 60 s' }));
  process.exit(1); }, 60000);

async function one(binding, version, shape) {
  const answer = await fetch(cardUrl, { headers: shape === 'legacy' ? { 'A2A-Version': '0.3' } : {} });
  const json = await answer.json();
  let card;
  if (shape === 'legacy') {
    delete json.supportedInterfaces;
    card = parseLegacyAgentCard(json);
  } else {
    card = AgentCard.fromJSON(json);
  }
  const chosen = card.supportedInterfaces.filter(
    (i) => i.protocolBinding === binding && i.protocolVersion.startsWith(version));
  if (chosen.length === 0) throw new Error(`the card lists no ${binding} ${version} interface`);
  card.supportedInterfaces = [chosen[0]];
  const compat = { legacyCompat: { enabled: true } };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory(compat), new RestTransportFactory(compat), new GrpcTransportFactory(compat)],
    preferredTransports: [binding],
  }));
  const client = await factory.createFromAgentCard(card);
  const result = await client.sendMessage({
    tenant: '', metadata: {},
    message: {
      messageId: crypto.randomUUID(), role: Role.ROLE_USER, taskId: '', contextId: '', extensions: [],
      metadata: {}, referenceTaskIds: [],
      parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    },
    configuration: undefined,
  });
  const task = result && result.id !== undefined && result.status ? result : result?.payload?.value ?? result;
  const parts = [...(task.status?.message?.parts ?? task.parts ?? []),
    ...(task.artifacts ?? []).flatMap((a) => a.parts ?? [])];
  const words = parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');
  return {
    ok: true, url: chosen[0].url, transport: Object.getPrototypeOf(client.transport).constructor.name,
    state: task.status ? taskStateToJSON(task.status.state) : null, text: words,
  };
}

let failed = false;
for (const combo of combos) {
  const [binding, version, shape = 'hybrid'] = combo.split('@');
  let line;
  try {
    line = await one(binding, version, shape);
  } catch (err) {
    failed = true;
    line = { ok: false, error: String((err && err.message) || err) };
  }
  console.log(JSON.stringify({ binding, version, shape, ...line }));
}
clearTimeout(deadline);
process.exit(failed ? 1 : 0);
