"""One client for every OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp).

For now: endpoint resolution per role from settings. The client, ledger and retries
build on it."""
