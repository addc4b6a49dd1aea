/*

pynq-kv: synchronous first-word-fall-through FIFO

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Synchronous first-word-fall-through FIFO, the one FIFO module of the
 * design (docs/rtl.md), used by kv_eth_rx, kv_eth_tx and kv_mc_core;
 * kv_engine keeps its own response FIFO (any depth from 2, part of its
 * admission credit), and the frame and reply buffers are RAMs of their own.
 * The oldest word is on m_data whenever m_valid is high, no read request is
 * needed, and m_ready pops it.  One push and one pop per cycle, full
 * throughput.  s_ready is "not full" and m_valid "not empty": neither depends
 * combinationally on the other side.
 *
 * OUTPUT_REG selects how the head word leaves the RAM:
 *   0  read asynchronously (m_data comes straight from the memory), so the
 *      FIFO maps to distributed RAM (LUTRAM).  A word written at clock edge n
 *      is on m_* after edge n.  Holds DEPTH words.
 *   1  read synchronously into an output register, so a wide or deep FIFO
 *      maps to block RAM.  A word written at edge n is on m_* after edge n+1
 *      at the earliest.  Holds DEPTH words in the RAM plus one in the output
 *      register; s_ready is low only when the RAM is full.
 *
 * `count` is the number of words held (output register included).
 */
module kv_fifo #
(
    // Width of a word in bits: 1 or more
    parameter WIDTH = 8,
    // RAM depth in words: a power of two from 2 to 65536
    parameter DEPTH = 4,
    // 0: asynchronous read (LUTRAM); 1: synchronous read into an output register (block RAM)
    parameter OUTPUT_REG = 0
)
(
    input  wire                     clk,
    input  wire                     rst,

    input  wire [WIDTH-1:0]         s_data,
    input  wire                     s_valid,
    output wire                     s_ready,

    output wire [WIDTH-1:0]         m_data,
    output wire                     m_valid,
    input  wire                     m_ready,

    output wire [$clog2(DEPTH):0]   count
);

localparam AW = $clog2(DEPTH);

// check configuration
initial begin
    if (WIDTH < 1) begin
        $error("Error: WIDTH must be at least 1 (instance %m)");
        $finish;
    end
    if (DEPTH < 2 || DEPTH > 65536 || (DEPTH & (DEPTH - 1)) != 0) begin
        $error("Error: DEPTH must be a power of two from 2 to 65536 (instance %m)");
        $finish;
    end
    if (OUTPUT_REG != 0 && OUTPUT_REG != 1) begin
        $error("Error: OUTPUT_REG must be 0 or 1 (instance %m)");
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:DEPTH-1];
reg [AW:0] wr_ptr_reg;
reg [AW:0] rd_ptr_reg;

wire full = (wr_ptr_reg[AW-1:0] == rd_ptr_reg[AW-1:0]) && (wr_ptr_reg[AW] != rd_ptr_reg[AW]);
wire empty = wr_ptr_reg == rd_ptr_reg;
wire wr = s_valid && !full;
wire [AW:0] ram_count = wr_ptr_reg - rd_ptr_reg;

assign s_ready = !full;

always @(posedge clk) begin
    if (wr) begin
        mem[wr_ptr_reg[AW-1:0]] <= s_data;
    end
end

always @(posedge clk) begin
    if (wr) begin
        wr_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (rst) begin
        wr_ptr_reg <= {AW+1{1'b0}};
    end
end

generate
    if (OUTPUT_REG == 0) begin : async_read
        assign m_valid = !empty;
        assign m_data = mem[rd_ptr_reg[AW-1:0]];
        assign count = ram_count;

        always @(posedge clk) begin
            if (m_ready && !empty) begin
                rd_ptr_reg <= rd_ptr_reg + 1'b1;
            end
            if (rst) begin
                rd_ptr_reg <= {AW+1{1'b0}};
            end
        end
    end else begin : output_reg
        reg [WIDTH-1:0] out_data_reg;
        reg out_valid_reg;
        // the RAM's head moves to the output register when that is empty or being popped
        wire rd = !empty && (!out_valid_reg || m_ready);

        assign m_valid = out_valid_reg;
        assign m_data = out_data_reg;
        assign count = ram_count + {{AW{1'b0}}, out_valid_reg};

        always @(posedge clk) begin
            if (rd) begin
                out_data_reg <= mem[rd_ptr_reg[AW-1:0]];
            end
        end

        always @(posedge clk) begin
            if (rd) begin
                rd_ptr_reg <= rd_ptr_reg + 1'b1;
                out_valid_reg <= 1'b1;
            end else if (m_ready) begin
                out_valid_reg <= 1'b0;
            end
            if (rst) begin
                rd_ptr_reg <= {AW+1{1'b0}};
                out_valid_reg <= 1'b0;
            end
        end
    end
endgenerate

endmodule

`resetall
