{
  "targets": [
    {
      "target_name": "malloc_trim",
      "sources": ["trim.c"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
